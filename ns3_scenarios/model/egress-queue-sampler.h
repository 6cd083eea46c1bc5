/**
 * @file
 * @ingroup cosim
 * Periodic sampler of egress queue depth on a set of ports; stores only changes.
 */
#ifndef COSIM_EGRESS_QUEUE_SAMPLER_H
#define COSIM_EGRESS_QUEUE_SAMPLER_H

#include "egress-port.h"
#include "reusable-event.h"

#include "ns3/nstime.h"
#include "ns3/object.h"

#include <vector>

namespace ns3
{

/**
 * @ingroup cosim
 * @brief At every multiple of Interval, records (time, node, port, bytes) for each watched port whose
 * queued bytes differ from its last record.
 *
 * Change-driven: a port tells the sampler the first time its queue changes after a sample, and only
 * those ports are read at the next tick; without changes no tick is scheduled at all. An idle fabric, or
 * a compute phase of a co-simulation, thus costs neither events nor storage, and a queue that drains
 * records its return to zero once. The sampler is one reusable event, independent of the packet count.
 */
class EgressQueueSampler : public Object
{
  public:
    /// @return the TypeId of EgressQueueSampler
    static TypeId GetTypeId();

    EgressQueueSampler();
    ~EgressQueueSampler() override;

    /// Watch @p port, reported as port number @p portIndex of node @p nodeId.
    void Watch(uint32_t nodeId, uint32_t portIndex, Ptr<EgressPort> port);

    /// Start sampling: from now on, changed ports are recorded at the next multiple of Interval.
    void Start();

    /// Watched port number @p index changed its queue since its last sample.
    void MarkDirty(uint32_t index);

    /// Stop sampling (the pending event, if any, becomes a no-op).
    void Stop();

    /// @return sample times, in ps
    const std::vector<int64_t>& GetTimesPs() const
    {
        return m_timePs;
    }

    /// @return node id of each sample
    const std::vector<int32_t>& GetNodes() const
    {
        return m_node;
    }

    /// @return port number of each sample
    const std::vector<int32_t>& GetPorts() const
    {
        return m_port;
    }

    /// @return queued wire bytes of each sample, in bytes
    const std::vector<int64_t>& GetBytes() const
    {
        return m_bytes;
    }

  protected:
    void DoDispose() override;

  private:
    /// Event: sample the ports that changed since the last tick.
    void Sample();

    Time m_interval;                        ///< sampling period
    bool m_running{false};                  ///< changes are recorded while true
    std::vector<uint32_t> m_dirty;          ///< watched ports changed since the last tick
    bool m_pending{false};                  ///< the sample event is scheduled
    std::vector<Ptr<EgressPort>> m_watched; ///< ports sampled
    std::vector<int32_t> m_watchedNode;     ///< node id of each watched port
    std::vector<int32_t> m_watchedPort;     ///< port number of each watched port
    std::vector<int64_t> m_lastBytes;       ///< last recorded depth per watched port, in bytes
    std::vector<int64_t> m_timePs;          ///< recorded sample times, in ps
    std::vector<int32_t> m_node;            ///< recorded node ids
    std::vector<int32_t> m_port;            ///< recorded port numbers
    std::vector<int64_t> m_bytes;           ///< recorded depths, in bytes
    Ptr<ReusableEvent<EgressQueueSampler, &EgressQueueSampler::Sample>> m_event; ///< the sample tick
};

} // namespace ns3

#endif // COSIM_EGRESS_QUEUE_SAMPLER_H
