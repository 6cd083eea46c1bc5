/**
 * @file
 * @ingroup cosim
 * A table of events the engine records from the models' trace sources, declared once (EventLogDecl) and
 * read by name (Engine::NumLogRows, Engine::GetLogColumn), so that readers sort and merge every log
 * without knowing which logs exist.
 */
#ifndef COSIM_EVENT_LOG_H
#define COSIM_EVENT_LOG_H

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace cosim
{

/// Element type of an event-log column (numpy's names: "int8", "int32", "int64").
enum class ColumnType : uint8_t
{
    INT8 = 0,
    INT32 = 1,
    INT64 = 2,
};

/// What a column is to a reader that sorts or merges logs without knowing them.
enum class ColumnRole : uint8_t
{
    TIME = 0,  ///< when the event happened, in ps: the first column of every log
    KEY = 1,   ///< what the event happened to (node, port, queue): logs sort by time, then their keys in order
    VALUE = 2, ///< what happened (a state): rows of equal time and keys keep the order they were recorded in
};

/// One column of an event log.
struct LogColumn
{
    const char* name;        ///< as Python names it; a time in ps ends in "_ps"
    ColumnType type;         ///< element type
    ColumnRole role;         ///< how readers order rows by it
    const char* unit;        ///< "ps" for times; "" for ids, codes and states
    const char* description; ///< its meaning (codes spelled out)
};

/**
 * One event log: a name and its columns. Every engine log records events of switch or NIC egress ports:
 * its keys begin with the node id ("node") and the port number ("port"), which a decomposed run relabels
 * (cosim.decompose.exact).
 */
struct EventLogDecl
{
    const char* name;               ///< the log's name, also the results table it is stored as
    std::vector<LogColumn> columns; ///< first the TIME column, then keys, then values
};

/// @return numpy's name of column type @p t ("int8", "int32", "int64")
const char* TypeName(ColumnType t);

/// @return the name of role @p r ("time", "key", "value")
const char* RoleName(ColumnRole r);

/**
 * @brief The rows of one declared log, each column kept in its declared width.
 */
class EventLog
{
  public:
    /// An empty log of declaration @p decl (which outlives it).
    explicit EventLog(const EventLogDecl& decl);

    /// @return the log's declaration
    const EventLogDecl& Decl() const
    {
        return *m_decl;
    }

    /// @return number of rows
    uint64_t Rows() const
    {
        return m_rows;
    }

    /// Append a row: one value per column, in column order, each within its column's type.
    void Append(std::initializer_list<int64_t> values);

    /// @return the index of column @p name (throws std::invalid_argument naming the log's columns)
    std::size_t ColumnIndex(const std::string& name) const;

    /// Copy column @p c, of type INT64, to @p out[Rows()] (throws std::invalid_argument for another type).
    void Copy(std::size_t c, int64_t* out) const;
    /// Copy column @p c, of type INT32, to @p out[Rows()].
    void Copy(std::size_t c, int32_t* out) const;
    /// Copy column @p c, of type INT8, to @p out[Rows()].
    void Copy(std::size_t c, int8_t* out) const;

  private:
    /// The values of one column; only the vector of its type is used.
    struct Column
    {
        std::vector<int8_t> i8;
        std::vector<int32_t> i32;
        std::vector<int64_t> i64;
    };

    /// Throw std::invalid_argument unless column @p c has type @p t.
    void CheckType(std::size_t c, ColumnType t) const;

    const EventLogDecl* m_decl;    ///< what the columns are
    std::vector<Column> m_columns; ///< one per declared column
    uint64_t m_rows{0};            ///< rows appended
};

} // namespace cosim

#endif // COSIM_EVENT_LOG_H
