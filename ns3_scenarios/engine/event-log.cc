#include "event-log.h"

#include "ns3/assert.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace cosim
{

const char*
TypeName(ColumnType t)
{
    static const char* const names[] = {"int8", "int32", "int64"}; // in ColumnType order
    return names[std::size_t(t)];
}

const char*
RoleName(ColumnRole r)
{
    static const char* const names[] = {"time", "key", "value"}; // in ColumnRole order
    return names[std::size_t(r)];
}

EventLog::EventLog(const EventLogDecl& decl)
    : m_decl(&decl),
      m_columns(decl.columns.size())
{
    NS_ASSERT_MSG(!decl.columns.empty() && decl.columns.front().role == ColumnRole::TIME,
                  "event log " << decl.name << " must begin with its time column");
}

void
EventLog::Append(std::initializer_list<int64_t> values)
{
    NS_ASSERT_MSG(values.size() == m_columns.size(),
                  "event log " << m_decl->name << " takes " << m_columns.size() << " values per row, got "
                               << values.size());
    std::size_t c = 0;
    for (const int64_t v : values)
    {
        Column& col = m_columns[c];
        switch (m_decl->columns[c++].type)
        {
        case ColumnType::INT8:
            NS_ASSERT_MSG(v >= std::numeric_limits<int8_t>::min() && v <= std::numeric_limits<int8_t>::max(),
                          "value " << v << " does not fit an int8 column of " << m_decl->name);
            col.i8.push_back(int8_t(v));
            break;
        case ColumnType::INT32:
            NS_ASSERT_MSG(v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max(),
                          "value " << v << " does not fit an int32 column of " << m_decl->name);
            col.i32.push_back(int32_t(v));
            break;
        case ColumnType::INT64:
            col.i64.push_back(v);
            break;
        }
    }
    ++m_rows;
}

std::size_t
EventLog::ColumnIndex(const std::string& name) const
{
    std::string names;
    for (std::size_t c = 0; c < m_decl->columns.size(); ++c)
    {
        if (name == m_decl->columns[c].name)
        {
            return c;
        }
        names += (c ? ", " : "") + std::string(m_decl->columns[c].name);
    }
    throw std::invalid_argument("event log " + std::string(m_decl->name) + " has no column " + name + " (it has " +
                                names + ")");
}

void
EventLog::CheckType(std::size_t c, ColumnType t) const
{
    NS_ASSERT_MSG(c < m_columns.size(), "event log " << m_decl->name << " has no column " << c);
    const LogColumn& col = m_decl->columns[c];
    if (col.type != t)
    {
        throw std::invalid_argument("column " + std::string(col.name) + " of event log " + m_decl->name + " is " +
                                    TypeName(col.type) + ", not " + TypeName(t));
    }
}

void
EventLog::Copy(std::size_t c, int64_t* out) const
{
    CheckType(c, ColumnType::INT64);
    std::copy(m_columns[c].i64.begin(), m_columns[c].i64.end(), out);
}

void
EventLog::Copy(std::size_t c, int32_t* out) const
{
    CheckType(c, ColumnType::INT32);
    std::copy(m_columns[c].i32.begin(), m_columns[c].i32.end(), out);
}

void
EventLog::Copy(std::size_t c, int8_t* out) const
{
    CheckType(c, ColumnType::INT8);
    std::copy(m_columns[c].i8.begin(), m_columns[c].i8.end(), out);
}

} // namespace cosim
