#include "egress-queue-sampler.h"

#include "simulation-clock.h"

#include "ns3/simulator.h"

#include <algorithm>

namespace ns3
{

NS_OBJECT_ENSURE_REGISTERED(EgressQueueSampler);

TypeId
EgressQueueSampler::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::EgressQueueSampler")
            .SetParent<Object>()
            .SetGroupName("Cosim")
            .AddConstructor<EgressQueueSampler>()
            .AddAttribute("Interval",
                          "Time between two samples of every watched egress queue.",
                          TimeValue(MicroSeconds(1)),
                          MakeTimeAccessor(&EgressQueueSampler::m_interval),
                          MakeTimeChecker(PicoSeconds(1)));
    return tid;
}

EgressQueueSampler::EgressQueueSampler()
    : m_event(Create<ReusableEvent<EgressQueueSampler, &EgressQueueSampler::Sample>>(this))
{
}

EgressQueueSampler::~EgressQueueSampler() = default;

void
EgressQueueSampler::Watch(uint32_t nodeId, uint32_t portIndex, Ptr<EgressPort> port)
{
    port->SetSampler(this, uint32_t(m_watched.size()));
    m_watched.push_back(port);
    m_watchedNode.push_back(static_cast<int32_t>(nodeId));
    m_watchedPort.push_back(static_cast<int32_t>(portIndex));
    m_lastBytes.push_back(0);
}

void
EgressQueueSampler::Start()
{
    m_running = true;
}

void
EgressQueueSampler::MarkDirty(uint32_t index)
{
    m_dirty.push_back(index);
    if (!m_pending && m_running)
    {
        const int64_t nowPs = cosim::NowPs();
        const int64_t step = m_interval.GetTimeStep();
        m_pending = true;
        cosim::ScheduleInPs((nowPs / step + 1) * step - nowPs, *m_event);
    }
}

void
EgressQueueSampler::Stop()
{
    m_running = false;
}

void
EgressQueueSampler::Sample()
{
    m_pending = false;
    if (!m_running)
    {
        return;
    }
    const int64_t nowPs = cosim::NowPs();
    std::sort(m_dirty.begin(), m_dirty.end()); // records of one tick in port order
    for (uint32_t i : m_dirty)
    {
        m_watched[i]->ClearSampleMark();
        const auto bytes = static_cast<int64_t>(m_watched[i]->GetQueueBytes());
        if (bytes != m_lastBytes[i])
        {
            m_lastBytes[i] = bytes;
            m_timePs.push_back(nowPs);
            m_node.push_back(m_watchedNode[i]);
            m_port.push_back(m_watchedPort[i]);
            m_bytes.push_back(bytes);
        }
    }
    m_dirty.clear();
}

void
EgressQueueSampler::DoDispose()
{
    m_running = false;
    m_watched.clear();
    Object::DoDispose();
}

} // namespace ns3
