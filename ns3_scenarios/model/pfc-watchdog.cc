#include "pfc-watchdog.h"

#include "egress-port.h"

#include "ns3/boolean.h"
#include "ns3/simulator.h"

namespace ns3
{

NS_OBJECT_ENSURE_REGISTERED(PfcWatchdog);

TypeId
PfcWatchdog::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::PfcWatchdog")
            .SetParent<Object>()
            .SetGroupName("Cosim")
            .AddConstructor<PfcWatchdog>()
            .AddAttribute("Enabled",
                          "Run the PFC watchdog on every switch egress queue (PFC links only). Off by default.",
                          BooleanValue(false),
                          MakeBooleanAccessor(&PfcWatchdog::m_enabled),
                          MakeBooleanChecker())
            .AddAttribute("DetectionTime",
                          "Uninterrupted pause of a switch egress queue after which the watchdog disables it, "
                          "a time (SONiC's default detection time: 200 ms).",
                          TimeValue(MilliSeconds(200)),
                          MakeTimeAccessor(&PfcWatchdog::m_detectionTime),
                          MakeTimeChecker(PicoSeconds(1)))
            .AddAttribute("RestorationTime",
                          "Time without a PAUSE frame for a disabled queue after which it is enabled again, "
                          "a time (SONiC's default restoration time: 200 ms).",
                          TimeValue(MilliSeconds(200)),
                          MakeTimeAccessor(&PfcWatchdog::m_restorationTime),
                          MakeTimeChecker(PicoSeconds(1)))
            .AddTraceSource("Action",
                            "The watchdog disabled (true) or restored (false) the queue of a priority of a port.",
                            MakeTraceSourceAccessor(&PfcWatchdog::m_actionTrace),
                            "ns3::PfcWatchdog::ActionCallback");
    return tid;
}

void
PfcWatchdog::Watch(Ptr<FabricNode> sw)
{
    NS_ASSERT_MSG(!m_switch, "a PfcWatchdog watches one switch");
    if (!m_enabled)
    {
        return;
    }
    m_switch = sw;
    m_queues.assign(std::size_t(sw->GetNPorts()) * kNumPriorities, QueueState{});
    for (uint32_t p = 0; p < sw->GetNPorts(); ++p)
    {
        Ptr<EgressPort> port = sw->GetPort(p);
        if (port->GetFlowControl() != EgressPort::FlowControl::PFC)
        {
            continue; // credit links are never paused
        }
        port->TraceConnectWithoutContext("PfcPause", MakeCallback(&PfcWatchdog::OnPause, this).Bind(p));
        port->TraceConnectWithoutContext("PauseIgnored", MakeCallback(&PfcWatchdog::OnPauseIgnored, this).Bind(p));
    }
}

void
PfcWatchdog::OnPause(uint32_t port, uint8_t prio, bool paused)
{
    QueueState& q = StateOf(port, prio);
    if (!paused)
    {
        q.pauseStartPs = -1;
        return;
    }
    q.pauseStartPs = Simulator::Now().GetTimeStep();
    if (!q.checkPending && !q.disabled)
    {
        q.checkPending = true;
        Simulator::Schedule(m_detectionTime, &PfcWatchdog::CheckStorm, this, port, prio);
    }
}

void
PfcWatchdog::OnPauseIgnored(uint32_t port, uint8_t prio)
{
    QueueState& q = StateOf(port, prio);
    NS_ASSERT_MSG(q.disabled, "a PAUSE frame was ignored by a queue the watchdog did not disable");
    q.lastIgnoredPs = Simulator::Now().GetTimeStep();
}

void
PfcWatchdog::CheckStorm(uint32_t port, uint8_t prio)
{
    QueueState& q = StateOf(port, prio);
    NS_ASSERT_MSG(q.checkPending, "a storm check nobody scheduled");
    q.checkPending = false;
    if (q.disabled || q.pauseStartPs < 0)
    {
        return; // the pause ended: the next one schedules its own check
    }
    const int64_t nowPs = Simulator::Now().GetTimeStep();
    const int64_t deadlinePs = q.pauseStartPs + m_detectionTime.GetTimeStep();
    if (nowPs < deadlinePs)
    {
        q.checkPending = true; // the pause broke and began again since: check at this pause's deadline
        Simulator::Schedule(TimeStep(deadlinePs - nowPs), &PfcWatchdog::CheckStorm, this, port, prio);
        return;
    }
    q.disabled = true;
    q.lastIgnoredPs = nowPs;
    ++m_actions;
    m_actionTrace(port, prio, true);
    m_switch->GetPort(port)->DisableQueue(prio);
    Simulator::Schedule(m_restorationTime, &PfcWatchdog::CheckRestore, this, port, prio);
}

void
PfcWatchdog::CheckRestore(uint32_t port, uint8_t prio)
{
    QueueState& q = StateOf(port, prio);
    NS_ASSERT_MSG(q.disabled, "a restoration check of a queue that is not disabled");
    const int64_t nowPs = Simulator::Now().GetTimeStep();
    const int64_t duePs = q.lastIgnoredPs + m_restorationTime.GetTimeStep();
    if (nowPs < duePs)
    {
        Simulator::Schedule(TimeStep(duePs - nowPs), &PfcWatchdog::CheckRestore, this, port, prio);
        return;
    }
    q.disabled = false;
    q.pauseStartPs = -1;
    ++m_actions;
    m_actionTrace(port, prio, false);
    m_switch->GetPort(port)->EnableQueue(prio);
}

void
PfcWatchdog::DoDispose()
{
    m_switch = nullptr;
    Object::DoDispose();
}

} // namespace ns3
