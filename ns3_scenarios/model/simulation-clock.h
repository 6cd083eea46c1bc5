/**
 * @file
 * @ingroup cosim
 * The running simulation's clock and event queue as the packet path uses them.
 *
 * Every cosim run is on LeanSimulatorImpl: these read its time and queue a model's reusable event directly,
 * without the Time objects, the EventId and the virtual calls of ns3::Simulator (a fifth of the packet path's
 * instructions); under any other SimulatorImpl they go through ns3::Simulator. Either way the event gets the
 * same time, context and uid, so results are the same bit for bit.
 */
#ifndef COSIM_SIMULATION_CLOCK_H
#define COSIM_SIMULATION_CLOCK_H

#include "lean-simulator-impl.h"

#include "ns3/event-impl.h"
#include "ns3/nstime.h"
#include "ns3/ptr.h"
#include "ns3/simulator.h"

#include <cstdint>

namespace cosim
{

/// @return the current simulation time, in time steps (ps: cosim runs at picosecond resolution)
inline __attribute__((always_inline)) int64_t
NowPs()
{
    const ns3::LeanSimulatorImpl* lean = ns3::LeanSimulatorImpl::Running();
    return lean != nullptr ? int64_t(lean->NowSteps()) : ns3::Simulator::Now().GetTimeStep();
}

/// Schedule @p event to run @p delayPs (>= 0) time steps from now, as ns3::Simulator::Schedule would
/// (which also refuses a negative delay). Its owner keeps it alive until it has run; the queue holds no
/// reference to it (under another SimulatorImpl, a call of its Fire), so it may be a member of its owner.
inline __attribute__((always_inline)) void
ScheduleInPs(int64_t delayPs, ns3::DirectEvent& event)
{
    ns3::LeanSimulatorImpl* lean = ns3::LeanSimulatorImpl::Running();
    if (lean != nullptr && delayPs >= 0)
    {
        lean->ScheduleDirect(uint64_t(delayPs), &event);
        return;
    }
    ns3::Simulator::Schedule(ns3::TimeStep(delayPs), &ns3::DirectEvent::Fire, &event);
}

} // namespace cosim

#endif // COSIM_SIMULATION_CLOCK_H
