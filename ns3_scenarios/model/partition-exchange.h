/**
 * @file
 * @ingroup cosim
 * The packets a partitioned run moves between partitions: what leaves on a cut link during a window, and
 * its arrival on the far side at the start of the next one.
 */
#ifndef COSIM_PARTITION_EXCHANGE_H
#define COSIM_PARTITION_EXCHANGE_H

#include "fabric-packet.h"

#include "ns3/event-impl.h"
#include "ns3/ptr.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ns3
{

class FabricNode;
class PacketPool;

/**
 * @ingroup cosim
 * @brief A packet on a cut link, as it crosses between partitions (and MPI ranks): plain bytes.
 *
 * Its layout is what cosim/parallel.py's RECORD_DTYPE reads: the time its last bit reaches the far end, the
 * receiving node and its input port there, then the FabricPacket's bytes.
 */
struct ExchangeRecord
{
    int64_t duePs;                             ///< arrival of the last bit at the receiving node, in ps
    int32_t node;                              ///< receiving node id
    int32_t port;                              ///< input port number there
    uint8_t packet[sizeof(FabricPacket)];      ///< the packet, field for field
};

static_assert(sizeof(ExchangeRecord) == 16 + sizeof(FabricPacket), "records cross MPI as packed bytes");

/**
 * @ingroup cosim
 * @brief The receiving end of a cut link: the packets injected for it, delivered one after another as
 * EgressPort delivers its own wire (one pending event per link, not per packet).
 */
class IncomingWire
{
  public:
    /// The wire into port @p port of @p node.
    IncomingWire(FabricNode* node, uint32_t port);

    /// Packet @p p (owned from now on) reaches the node when its last bit arrives, at @p duePs (not before
    /// the last packet's).
    void Arrive(FabricPacket* p, int64_t duePs);

  private:
    /// Event: the head packet arrived; schedule the next one's arrival.
    void Deliver();

    PacketFifo m_wire;       ///< packets on the way, in arrival order (each holds the next one's arrival)
    int64_t m_headDuePs{0};  ///< arrival of m_wire's head, in ps
    FabricNode* m_node;      ///< receiving node
    uint32_t m_port;         ///< input port there
    Ptr<EventImpl> m_event;  ///< Deliver (a ReusableEvent)
};

/**
 * @ingroup cosim
 * @brief Conservative synchronization of a partitioned run (docs/parallel.md).
 *
 * Every node belongs to a partition. A link between two partitions is cut: its sending port posts each
 * packet here when it starts serializing (EgressPort::SetExchange) instead of delivering it itself. A
 * partitioned run advances in windows no longer than the shortest cut link's delay, so every packet posted
 * in a window arrives after the window ends; between windows the posted packets are injected on their
 * receiving side, in (arrival time, node, port) order, whichever partition or process sent them. Nothing
 * in that order depends on how partitions are spread over processes, so the run gives the same results
 * on one process or many.
 */
class PartitionExchange
{
  public:
    /// Post packet @p p, leaving a cut link now, to arrive at port @p port of node @p node at @p duePs.
    void Post(int64_t duePs, uint32_t node, uint32_t port, const FabricPacket* p);

    /// @return records posted since the last Take
    uint64_t Pending() const
    {
        return m_outbox.size();
    }

    /// A window ended.
    void CountWindow()
    {
        ++m_windows;
    }

    /// @return windows run so far
    uint64_t GetWindows() const
    {
        return m_windows;
    }

    /// @return packets posted so far (packet-hops of cut links)
    uint64_t GetPosted() const
    {
        return m_posted;
    }

    /// Move the records posted since the last Take to @p out[Pending()].
    void Take(ExchangeRecord* out);


    /// Port @p port of @p node is the receiving end of a cut link (before Inject).
    void AddWire(FabricNode* node, uint32_t port);

    /**
     * @brief Sort the records (SortForInjection) and put each one's packet on its cut link's receiving end,
     * to arrive (FabricNode::Receive) when it is due.
     * @param records packets arriving, each due at or after now (sorted in place)
     * @param n number of records
     * @param pool where the arriving packets are allocated
     * @return an empty string, or what is wrong with a record (not a cut link's end, arrival in the past)
     */
    std::string Inject(ExchangeRecord* records, uint64_t n, PacketPool* pool);

  private:
    std::vector<ExchangeRecord> m_outbox; ///< posted since the last Take, in posting order
    std::vector<std::unique_ptr<IncomingWire>> m_wires;  ///< the receiving ends of the cut links
    std::vector<std::vector<IncomingWire*>> m_wireAt;    ///< [node][port]: its wire, or null
    uint64_t m_posted{0};                 ///< packets posted so far
    uint64_t m_windows{0};                ///< windows run so far
};

} // namespace ns3

#endif // COSIM_PARTITION_EXCHANGE_H
