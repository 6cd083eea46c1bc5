/**
 * @file
 * @ingroup cosim
 * The run's flows as plain parallel arrays (structure of arrays), shared by every NIC.
 */
#ifndef COSIM_FLOW_TABLE_H
#define COSIM_FLOW_TABLE_H

#include "ns3/abort.h"
#include "ns3/callback.h"

#include <cstdint>
#include <limits>
#include <vector>

namespace ns3
{

/**
 * @ingroup cosim
 * @brief Every flow of a run: endpoints, size, times and progress, indexed by flow id.
 *
 * Arrays rather than one object per flow: the Python side hands them over and reads them back in bulk,
 * and NICs touch only the fields they need.
 */
struct FlowTable
{
    static constexpr uint32_t kNoQueuePair = std::numeric_limits<uint32_t>::max(); ///< senderQp: not started
    static constexpr int64_t kNoCnp = std::numeric_limits<int64_t>::min(); ///< lastCnpPs: no CNP yet
    static constexpr uint64_t kMaxFlows = std::numeric_limits<uint32_t>::max(); ///< flow ids fit FabricPacket::flowId

    /// The byte counts every data packet reads or updates, side by side: one cache line for the sender and
    /// the receiver of a packet instead of one per column.
    struct Bytes
    {
        uint64_t sizeBytes;    ///< payload to deliver, in bytes
        uint64_t sentBytes;    ///< next payload byte the sender puts on the wire (go-back-N rewinds it), in bytes
        uint64_t rcvdBytes;    ///< payload delivered to the receiver, in bytes
        uint64_t unackedBytes; ///< receiver: payload since the flow's last ACK, in bytes (AckCoalescer)
    };

    std::vector<Bytes> bytes;          ///< per flow
    std::vector<uint32_t> src;         ///< source host node id
    std::vector<uint32_t> dst;         ///< destination host node id
    std::vector<int64_t> startPs;      ///< time the sender may start, in ps
    std::vector<int64_t> finishPs;     ///< time the last payload byte reached dst, in ps (-1 until then)
    std::vector<uint8_t> priority;     ///< priority class of the flow's data packets
    std::vector<uint16_t> qp;          ///< queue pair the flow's messages use towards dst (HostNic::QueuePairsPerConnection)
    // Per-flow state of the two NICs a flow joins, here rather than in a hash map per NIC: a flow has one
    // sender and one receiver, so one slot per flow id serves both, found by indexing (no hashing, no
    // node allocation per flow).
    std::vector<uint32_t> senderQp;     ///< the source NIC's index of the flow's queue pair (kNoQueuePair until it starts)
    std::vector<int64_t> lastCnpPs;     ///< receiver: time of the flow's last CNP, in ps (kNoCnp before the first)
    uint64_t completed{0};             ///< flows whose last byte arrived
    Callback<void, uint64_t> onFinish; ///< called with the flow id when a flow completes (may be null)
    Callback<void, uint64_t> onStart;  ///< called with the flow id when its sender starts it (may be null)

    /// @return number of flows
    uint64_t Size() const
    {
        return src.size();
    }

    /// Append one flow; @return its id.
    uint64_t Add(uint32_t from, uint32_t to, uint64_t payloadBytes, int64_t startTimePs, uint8_t prio)
    {
        NS_ABORT_MSG_IF(Size() >= kMaxFlows, "a run holds at most " << kMaxFlows << " flows");
        Resize(Size() + 1);
        Set(Size() - 1, from, to, payloadBytes, startTimePs, prio);
        return Size() - 1;
    }

    /**
     * Hold @p n flows, the new ones not started (start time -1). A partitioned run numbers its flows ahead,
     * the same in every process (a packet's flow id is its ECMP hash key, and packets cross processes), so
     * each process holds every flow of the run and sets those it starts.
     */
    void Resize(uint64_t n)
    {
        NS_ABORT_MSG_IF(n > kMaxFlows, "a run holds at most " << kMaxFlows << " flows");
        bytes.resize(n, Bytes{0, 0, 0, 0});
        src.resize(n, 0);
        dst.resize(n, 0);
        startPs.resize(n, -1);
        finishPs.resize(n, -1);
        priority.resize(n, 0);
        qp.resize(n, 0);
        senderQp.resize(n, kNoQueuePair);
        lastCnpPs.resize(n, kNoCnp);
    }

    /// Give flow @p id (below Size()) its endpoints, payload, start time and priority.
    void Set(uint64_t id, uint32_t from, uint32_t to, uint64_t payloadBytes, int64_t startTimePs, uint8_t prio)
    {
        bytes[id] = Bytes{payloadBytes, 0, 0, 0};
        src[id] = from;
        dst[id] = to;
        startPs[id] = startTimePs;
        priority[id] = prio;
    }
};

} // namespace ns3

#endif // COSIM_FLOW_TABLE_H
