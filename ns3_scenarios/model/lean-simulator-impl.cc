#include "lean-simulator-impl.h"

#include "ns3/assert.h"
#include "ns3/simulator.h"

#include <limits>

namespace ns3
{

NS_OBJECT_ENSURE_REGISTERED(LeanSimulatorImpl);

TypeId
LeanSimulatorImpl::GetTypeId()
{
    static TypeId tid = TypeId("ns3::LeanSimulatorImpl")
                            .SetParent<SimulatorImpl>()
                            .SetGroupName("Cosim")
                            .AddConstructor<LeanSimulatorImpl>();
    return tid;
}

LeanSimulatorImpl* LeanSimulatorImpl::s_running = nullptr;

LeanSimulatorImpl::LeanSimulatorImpl()
    : m_uid(EventId::UID::VALID),
      m_currentUid(EventId::UID::INVALID),
      m_currentContext(Simulator::NO_CONTEXT)
{
    s_running = this; // ns-3 runs one simulator at a time: a new one replaces the last
}

LeanSimulatorImpl::~LeanSimulatorImpl()
{
    if (s_running == this)
    {
        s_running = nullptr;
    }
}

void
LeanSimulatorImpl::DoDispose()
{
    if (s_running == this)
    {
        s_running = nullptr;
    }
    // The scheduler holds a reference to each pending event: drop them with it.
    while (m_events && !m_events->IsEmpty())
    {
        Release(m_events->RemoveNext().impl);
    }
    m_events = nullptr;
    m_queue = nullptr;
    m_wheel = nullptr;
    SimulatorImpl::DoDispose();
}

void
LeanSimulatorImpl::Destroy()
{
    while (!m_destroyEvents.empty())
    {
        Ptr<EventImpl> ev = m_destroyEvents.front().PeekEventImpl();
        m_destroyEvents.pop_front();
        if (!ev->IsCancelled())
        {
            ev->Invoke();
        }
    }
}

void
LeanSimulatorImpl::SetScheduler(ObjectFactory schedulerFactory)
{
    Ptr<Scheduler> scheduler = schedulerFactory.Create<Scheduler>();
    while (m_events && !m_events->IsEmpty())
    {
        scheduler->Insert(m_events->RemoveNext());
    }
    m_events = scheduler;
    m_queue = PeekPointer(m_events);
    m_wheel = dynamic_cast<TimingWheelScheduler*>(m_queue);
}

uint32_t
LeanSimulatorImpl::GetSystemId() const
{
    return 0; // one process
}

bool
LeanSimulatorImpl::IsFinished() const
{
    return m_events->IsEmpty() || m_stop;
}

void
LeanSimulatorImpl::Run()
{
    m_stop = false;
    while (m_unscheduledEvents != 0 && !m_stop) // the queue's size, without a virtual call
    {
        const Scheduler::Event next = m_wheel != nullptr ? m_wheel->RemoveNextEvent() : m_queue->RemoveNext();
        NS_ASSERT_MSG(next.key.m_ts >= m_currentTs, "an event earlier than the current time");
        --m_unscheduledEvents;
        ++m_eventCount;
        m_currentTs = next.key.m_ts;
        m_currentContext = next.key.m_context;
        m_currentUid = next.key.m_uid;
        if (DirectEvent* direct = AsDirect(next.impl))
        {
            direct->Fire();
        }
        else
        {
            next.impl->Invoke();
            next.impl->Unref(); // the scheduler's reference
        }
    }
    NS_ASSERT_MSG((m_unscheduledEvents == 0) == m_queue->IsEmpty(), "the count of pending events is off");
}

void
LeanSimulatorImpl::Stop()
{
    m_stop = true;
}

EventId
LeanSimulatorImpl::Stop(const Time& delay)
{
    return Simulator::Schedule(delay, &Simulator::Stop);
}

EventId
LeanSimulatorImpl::Schedule(const Time& delay, EventImpl* event)
{
    NS_ASSERT_MSG(delay.IsPositive(), "LeanSimulatorImpl::Schedule: negative delay");
    const Scheduler::EventKey key = Insert(event, m_currentTs + uint64_t(delay.GetTimeStep()), m_currentContext);
    return EventId(event, key.m_ts, key.m_context, key.m_uid);
}

void
LeanSimulatorImpl::ScheduleWithContext(uint32_t context, const Time& delay, EventImpl* event)
{
    Insert(event, m_currentTs + uint64_t(delay.GetTimeStep()), context);
}

EventId
LeanSimulatorImpl::ScheduleNow(EventImpl* event)
{
    return Schedule(Time(0), event);
}

EventId
LeanSimulatorImpl::ScheduleDestroy(EventImpl* event)
{
    EventId id(Ptr<EventImpl>(event, false), m_currentTs, Simulator::NO_CONTEXT, EventId::UID::DESTROY);
    m_destroyEvents.push_back(id);
    ++m_uid; // as DefaultSimulatorImpl: the uids of later events are the same
    return id;
}

Time
LeanSimulatorImpl::Now() const
{
    return TimeStep(m_currentTs);
}

Time
LeanSimulatorImpl::GetDelayLeft(const EventId& id) const
{
    return IsExpired(id) ? TimeStep(0) : TimeStep(id.GetTs() - m_currentTs);
}

void
LeanSimulatorImpl::Remove(const EventId& id)
{
    if (id.GetUid() == EventId::UID::DESTROY)
    {
        for (auto i = m_destroyEvents.begin(); i != m_destroyEvents.end(); ++i)
        {
            if (*i == id)
            {
                m_destroyEvents.erase(i);
                break;
            }
        }
        return;
    }
    if (IsExpired(id))
    {
        return;
    }
    Scheduler::Event event;
    event.impl = id.PeekEventImpl();
    event.key.m_ts = id.GetTs();
    event.key.m_context = id.GetContext();
    event.key.m_uid = id.GetUid();
    m_events->Remove(event);
    event.impl->Cancel();
    event.impl->Unref(); // the scheduler's reference
    --m_unscheduledEvents;
}

void
LeanSimulatorImpl::Cancel(const EventId& id)
{
    if (!IsExpired(id))
    {
        id.PeekEventImpl()->Cancel();
    }
}

bool
LeanSimulatorImpl::IsExpired(const EventId& id) const
{
    if (id.GetUid() == EventId::UID::DESTROY)
    {
        if (id.PeekEventImpl() == nullptr || id.PeekEventImpl()->IsCancelled())
        {
            return true;
        }
        for (const EventId& pending : m_destroyEvents)
        {
            if (pending == id)
            {
                return false;
            }
        }
        return true;
    }
    return id.PeekEventImpl() == nullptr || id.GetTs() < m_currentTs ||
           (id.GetTs() == m_currentTs && id.GetUid() <= m_currentUid) || id.PeekEventImpl()->IsCancelled();
}

Time
LeanSimulatorImpl::GetMaximumSimulationTime() const
{
    return TimeStep(std::numeric_limits<int64_t>::max());
}

uint32_t
LeanSimulatorImpl::GetContext() const
{
    return m_currentContext;
}

uint64_t
LeanSimulatorImpl::GetEventCount() const
{
    return m_eventCount;
}

} // namespace ns3
