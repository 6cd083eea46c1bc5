/**
 * @file
 * @ingroup cosim
 * The run's flows as plain parallel arrays (structure of arrays), shared by every NIC.
 */
#ifndef COSIM_FLOW_TABLE_H
#define COSIM_FLOW_TABLE_H

#include "ns3/callback.h"

#include <cstdint>
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
    std::vector<uint32_t> src;         ///< source host node id
    std::vector<uint32_t> dst;         ///< destination host node id
    std::vector<uint64_t> sizeBytes;   ///< payload to deliver, in bytes
    std::vector<int64_t> startPs;      ///< time the sender may start, in ps
    std::vector<int64_t> finishPs;     ///< time the last payload byte reached dst, in ps (-1 until then)
    std::vector<uint64_t> sentBytes;   ///< next payload byte the sender puts on the wire (go-back-N rewinds it), in bytes
    std::vector<uint64_t> rcvdBytes;   ///< payload delivered to the receiver, in bytes
    std::vector<uint8_t> priority;     ///< priority class of the flow's data packets
    std::vector<uint16_t> qp;          ///< queue pair the flow's messages use towards dst (HostNic::QueuePairsPerConnection)
    uint64_t completed{0};             ///< flows whose last byte arrived
    Callback<void, uint64_t> onFinish; ///< called with the flow id when a flow completes (may be null)

    /// @return number of flows
    uint64_t Size() const
    {
        return src.size();
    }

    /// Append one flow; @return its id.
    uint64_t Add(uint32_t from, uint32_t to, uint64_t bytes, int64_t startTimePs, uint8_t prio)
    {
        src.push_back(from);
        dst.push_back(to);
        sizeBytes.push_back(bytes);
        startPs.push_back(startTimePs);
        finishPs.push_back(-1);
        sentBytes.push_back(0);
        rcvdBytes.push_back(0);
        priority.push_back(prio);
        qp.push_back(0);
        return src.size() - 1;
    }
};

} // namespace ns3

#endif // COSIM_FLOW_TABLE_H
