#include "pause-storm-source.h"

#include "fabric-node.h"
#include "packet-pool.h"

#include "ns3/boolean.h"
#include "ns3/simulator.h"
#include "ns3/uinteger.h"

#include <algorithm>

namespace ns3
{

NS_OBJECT_ENSURE_REGISTERED(PauseStormSource);

TypeId
PauseStormSource::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::PauseStormSource")
            .SetParent<Object>()
            .SetGroupName("Cosim")
            .AddConstructor<PauseStormSource>()
            .AddAttribute("Quanta",
                          "Pause time every storm frame asks for, in quanta of 512 bit times at the link rate "
                          "(65535 at 100 Gbps: 335 us).",
                          UintegerValue(0xffff),
                          MakeUintegerAccessor(&PauseStormSource::m_quanta),
                          MakeUintegerChecker<uint32_t>(1, 0xffff))
            .AddAttribute("FrameInterval",
                          "Time between two storm frames (0 = half the pause time of Quanta, so the pause "
                          "never lapses), a time.",
                          TimeValue(Time(0)),
                          MakeTimeAccessor(&PauseStormSource::m_frameInterval),
                          MakeTimeChecker(Time(0)))
            .AddAttribute("FrameBytes",
                          "Wire size of a storm PAUSE frame (64 B frame + preamble and gap), in bytes.",
                          UintegerValue(84),
                          MakeUintegerAccessor(&PauseStormSource::m_frameBytes),
                          MakeUintegerChecker<uint32_t>(64, 1 << 16))
            .AddAttribute("ResumeAtEnd",
                          "Send a resume frame (zero quanta) when the storm ends, as a NIC that recovered "
                          "does; false: stop sending and let the last pause expire.",
                          BooleanValue(true),
                          MakeBooleanAccessor(&PauseStormSource::m_resumeAtEnd),
                          MakeBooleanChecker());
    return tid;
}

void
PauseStormSource::Start(Ptr<EgressPort> port,
                        PacketPool* pool,
                        uint32_t hostNode,
                        uint8_t priority,
                        int64_t startPs,
                        int64_t durationPs)
{
    NS_ASSERT_MSG(port && pool, "a pause storm needs the NIC's port and the packet pool");
    NS_ASSERT_MSG(port->GetFlowControl() == EgressPort::FlowControl::PFC,
                  "a pause storm needs a PFC link, node " << hostNode << "'s runs credits");
    NS_ASSERT_MSG(priority < kNumPriorities, "pause storm priority " << int(priority) << " out of range");
    const int64_t nowPs = Simulator::Now().GetTimeStep();
    NS_ASSERT_MSG(startPs >= nowPs && durationPs > 0, "a pause storm starts from now and lasts a positive time");
    m_port = port;
    m_pool = pool;
    m_hostNode = hostNode;
    m_priority = priority;
    m_endPs = startPs + durationPs;
    const int64_t pausePs = port->SerializationPs(uint64_t(m_quanta) * 64);
    // refreshed at half the pause time, as switches refresh their XOFF: the pause never lapses
    m_intervalPs =
        m_frameInterval.IsStrictlyPositive() ? m_frameInterval.GetTimeStep() : std::max<int64_t>(pausePs / 2, 1);
    m_next = Simulator::Schedule(TimeStep(startPs - nowPs), &PauseStormSource::SendFrame, this);
}

void
PauseStormSource::SendFrame()
{
    const int64_t nowPs = Simulator::Now().GetTimeStep();
    if (nowPs >= m_endPs)
    {
        if (m_resumeAtEnd)
        {
            Emit(0);
        }
        return;
    }
    Emit(m_quanta);
    ++m_framesSent;
    m_next = Simulator::Schedule(TimeStep(std::min(m_intervalPs, m_endPs - nowPs)), &PauseStormSource::SendFrame, this);
}

void
PauseStormSource::Emit(uint32_t quanta)
{
    FabricPacket* f = m_pool->Allocate();
    f->kind = PacketKind::PAUSE;
    f->priority = m_priority;
    f->aux = quanta;
    f->src = m_hostNode;
    f->dst = m_port->GetPeer()->GetNodeId();
    f->wireBytes = m_frameBytes;
    m_port->EnqueueControl(f);
}

void
PauseStormSource::DoDispose()
{
    m_next.Cancel();
    m_port = nullptr;
    m_pool = nullptr;
    Object::DoDispose();
}

} // namespace ns3
