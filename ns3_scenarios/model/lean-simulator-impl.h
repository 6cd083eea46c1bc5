/**
 * @file
 * @ingroup cosim
 * A single-threaded ns-3 simulator core without per-event logging checks or event hooks.
 */
#ifndef COSIM_LEAN_SIMULATOR_IMPL_H
#define COSIM_LEAN_SIMULATOR_IMPL_H

#include "reusable-event.h"
#include "timing-wheel-scheduler.h"

#include "ns3/event-id.h"
#include "ns3/scheduler.h"
#include "ns3/simulator-impl.h"

#include <cstdint>
#include <list>

namespace ns3
{

/**
 * @ingroup cosim
 * @brief The simulator core the cosim engine runs on: ns-3's DefaultSimulatorImpl, event for event, with
 * less work per event.
 *
 * Events run in the scheduler's order (time, then uid), uids are handed out in the same sequence, and the
 * event count, the current time, context and uid, cancellation, removal and expiry behave as in
 * DefaultSimulatorImpl, so a run gives the same results and the same event count. What it leaves out costs
 * instructions on every event: the function-logging checks of DefaultSimulatorImpl::Schedule and
 * ProcessOneEvent (the ns-3 library is built with logging on), the EventId built for PreEventHook before
 * each event (nothing in cosim hooks it), the virtual GetContext per Schedule, and the queue of events
 * scheduled from other threads (the engine runs on one thread; ScheduleWithContext from another thread is
 * not supported).
 */
class LeanSimulatorImpl final : public SimulatorImpl
{
  public:
    /// @return the TypeId of LeanSimulatorImpl
    static TypeId GetTypeId();

    LeanSimulatorImpl();
    ~LeanSimulatorImpl() override;
    LeanSimulatorImpl(const LeanSimulatorImpl&) = delete;
    LeanSimulatorImpl& operator=(const LeanSimulatorImpl&) = delete;

    void Destroy() override;
    bool IsFinished() const override;
    void Stop() override;
    EventId Stop(const Time& delay) override;
    EventId Schedule(const Time& delay, EventImpl* event) override;
    void ScheduleWithContext(uint32_t context, const Time& delay, EventImpl* event) override;
    EventId ScheduleNow(EventImpl* event) override;
    EventId ScheduleDestroy(EventImpl* event) override;
    void Remove(const EventId& id) override;
    void Cancel(const EventId& id) override;
    bool IsExpired(const EventId& id) const override;
    void Run() override;
    Time Now() const override;
    Time GetDelayLeft(const EventId& id) const override;
    Time GetMaximumSimulationTime() const override;
    void SetScheduler(ObjectFactory schedulerFactory) override;
    uint32_t GetSystemId() const override;
    uint32_t GetContext() const override;
    uint64_t GetEventCount() const override;

    /// @return the LeanSimulatorImpl that runs this process's simulation, or nullptr if another SimulatorImpl does
    static LeanSimulatorImpl* Running()
    {
        return s_running;
    }

    /// @return the current time, in time steps
    uint64_t NowSteps() const
    {
        return m_currentTs;
    }

    /**
     * @brief Schedule @p event @p delaySteps time steps from now, in the current context: Schedule without
     * the Time, the EventId it returns, the virtual call and the reference count, for the packet path's
     * reusable events. Run fires it without EventImpl::Invoke; no EventId names it, so it cannot be
     * removed or cancelled.
     * @param event an event its owner keeps alive until it has run (the queue takes no reference)
     */
    void ScheduleDirect(uint64_t delaySteps, DirectEvent* event)
    {
        Insert(TagDirect(event), m_currentTs + delaySteps, m_currentContext);
    }

  private:
    void DoDispose() override;

    // A direct event is queued as its pointer with the lowest bit set (EventImpl objects are at least
    // 2-byte aligned), so Run tells it from the others without reading the event.

    /// @return @p event as the queue holds it
    static EventImpl* TagDirect(DirectEvent* event)
    {
        return reinterpret_cast<EventImpl*>(reinterpret_cast<uintptr_t>(static_cast<EventImpl*>(event)) | 1U);
    }

    /// @return the direct event queued as @p impl, or nullptr if @p impl is an ordinary event
    static DirectEvent* AsDirect(EventImpl* impl)
    {
        const uintptr_t bits = reinterpret_cast<uintptr_t>(impl);
        return (bits & 1U) != 0 ? static_cast<DirectEvent*>(reinterpret_cast<EventImpl*>(bits & ~uintptr_t(1)))
                                : nullptr;
    }

    /// Drop the queue's reference to @p impl, which holds one unless it is a direct event.
    static void Release(EventImpl* impl)
    {
        if (AsDirect(impl) == nullptr)
        {
            impl->Unref();
        }
    }

    /// Queue @p event at absolute time @p tsSteps (time steps) with @p context; @return its key
    Scheduler::EventKey Insert(EventImpl* event, uint64_t tsSteps, uint32_t context)
    {
        Scheduler::Event ev;
        ev.impl = event;
        ev.key.m_ts = tsSteps;
        ev.key.m_context = context;
        ev.key.m_uid = m_uid++;
        ++m_unscheduledEvents;
        if (m_wheel != nullptr)
        {
            m_wheel->InsertEvent(ev);
        }
        else
        {
            m_queue->Insert(ev);
        }
        return ev.key;
    }

    static LeanSimulatorImpl* s_running; ///< the instance that runs the simulation (the last one built)

    Ptr<Scheduler> m_events;            ///< pending events
    Scheduler* m_queue{nullptr};        ///< m_events, read per event without Ptr's null check
    TimingWheelScheduler* m_wheel{nullptr}; ///< m_queue if it is the timing wheel: its calls inlined
    std::list<EventId> m_destroyEvents; ///< ScheduleDestroy's events, run by Destroy in order
    uint64_t m_currentTs{0};            ///< time of the event being run (or last run), in time steps
    uint64_t m_eventCount{0};           ///< events run so far
    int64_t m_unscheduledEvents{0};     ///< events scheduled and not yet run or removed
    uint32_t m_uid;                     ///< uid of the next event scheduled
    uint32_t m_currentUid;              ///< uid of the event being run (or last run)
    uint32_t m_currentContext;          ///< context of the event being run (or last run)
    bool m_stop{false};                 ///< Stop() was called: Run returns after the current event
};

} // namespace ns3

#endif // COSIM_LEAN_SIMULATOR_IMPL_H
