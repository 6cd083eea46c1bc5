/**
 * @file
 * @ingroup cosim
 * An ns-3 event bound once to a member function and scheduled again and again without allocating.
 */
#ifndef COSIM_REUSABLE_EVENT_H
#define COSIM_REUSABLE_EVENT_H

#include "ns3/event-impl.h"
#include "ns3/nstime.h"
#include "ns3/ptr.h"
#include "ns3/simulator.h"

namespace ns3
{

/**
 * @ingroup cosim
 * @brief An event that is never cancelled, so the simulator core may run it without EventImpl::Invoke
 * (whose cancellation check carries a logging check on every event).
 */
class DirectEvent : public EventImpl
{
  public:
    /// Run the event.
    void Fire()
    {
        Notify();
    }
};

/**
 * @ingroup cosim
 * @brief Calls (obj->*Method)() when it fires; one instance per pending-event slot of a component.
 *
 * The same object is scheduled again and again: through cosim::ScheduleInPs, which takes no reference
 * (so the event may be a member of its owner, whose own reference it keeps), or through
 * Simulator::Schedule(Time, Ptr<EventImpl>), which takes one and drops it after the event ran. A component
 * keeps at most one pending instance per slot (htsim: one pending event per component), so no event is
 * ever cancelled; stale firings are prevented by the owner's state instead, because EventImpl::Cancel
 * cannot be undone.
 */
template <typename T, void (T::*Method)()>
class ReusableEvent final : public DirectEvent
{
  public:
    /// Bind to @p owner (not owned; it must outlive every pending firing).
    explicit ReusableEvent(T* owner)
        : m_owner(owner)
    {
    }

  protected:
    void Notify() final
    {
        (m_owner->*Method)();
    }

  private:
    T* m_owner; ///< object whose member is called
};

} // namespace ns3

#endif // COSIM_REUSABLE_EVENT_H
