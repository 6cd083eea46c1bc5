/**
 * @file
 * @ingroup cosim
 * A fault: a host NIC that keeps sending PFC PAUSE frames for one priority (a PFC pause storm).
 */
#ifndef COSIM_PAUSE_STORM_SOURCE_H
#define COSIM_PAUSE_STORM_SOURCE_H

#include "egress-port.h"

#include "ns3/event-id.h"
#include "ns3/nstime.h"
#include "ns3/object.h"

#include <cstdint>

namespace ns3
{

class PacketPool;

/**
 * @ingroup cosim
 * @brief Sends PAUSE frames for one priority out of a NIC's port from a start time for a duration, as a
 * NIC whose receive pipeline hangs does (a PFC pause storm).
 *
 * The first frame leaves at the start time; each later one refreshes the pause before the switch's pause
 * timer runs out (every FrameInterval, by default half of Quanta's pause time at the link rate), so the
 * switch port towards the NIC stays paused for the whole storm. At the end it sends a resume frame
 * (ResumeAtEnd, a NIC that recovered) or just stops, and the last pause expires. The storm needs PFC: on
 * credit links (InfiniBand) there is no PAUSE frame to send. Frames come from the run's PacketPool and go
 * out as link-level control frames (ahead of the NIC's data); the source keeps one pending event.
 */
class PauseStormSource : public Object
{
  public:
    /// @return the TypeId of PauseStormSource
    static TypeId GetTypeId();

    PauseStormSource() = default;
    PauseStormSource(const PauseStormSource&) = delete;
    PauseStormSource& operator=(const PauseStormSource&) = delete;

    /**
     * @brief Attach the storm to a NIC's port and schedule it.
     * @param port the NIC's egress port (its link must run PFC)
     * @param pool packet allocator of the run
     * @param hostNode node id of the NIC (the frames' source)
     * @param priority the priority class the frames pause (below kNumPriorities)
     * @param startPs time of the first frame, in ps (not before now)
     * @param durationPs length of the storm, in ps (positive)
     */
    void Start(Ptr<EgressPort> port, PacketPool* pool, uint32_t hostNode, uint8_t priority, int64_t startPs,
               int64_t durationPs);

    /// @return PAUSE frames (non-zero quanta) sent so far
    uint64_t GetFramesSent() const
    {
        return m_framesSent;
    }

  protected:
    void DoDispose() override;

  private:
    /// Event: send a PAUSE frame now and schedule the next one, or end the storm.
    void SendFrame();
    /// Queue one PFC frame with @p quanta (0 = resume) on the port.
    void Emit(uint32_t quanta);

    uint32_t m_quanta{0xffff};     ///< pause time each frame asks for, in quanta of 512 bit times
    Time m_frameInterval;          ///< time between frames (0: half the pause time of m_quanta)
    uint32_t m_frameBytes{84};     ///< wire size of a PAUSE frame, in bytes
    bool m_resumeAtEnd{true};      ///< send a resume frame when the storm ends

    Ptr<EgressPort> m_port;        ///< the NIC's port the frames leave on
    PacketPool* m_pool{nullptr};   ///< packet allocator (not owned)
    uint32_t m_hostNode{0};        ///< node id of the storming NIC
    uint8_t m_priority{0};         ///< priority class paused
    int64_t m_endPs{0};            ///< end of the storm, in ps
    int64_t m_intervalPs{0};       ///< time between frames, in ps
    uint64_t m_framesSent{0};      ///< PAUSE frames with non-zero quanta sent
    EventId m_next;                ///< the next frame (or the end of the storm)
};

} // namespace ns3

#endif // COSIM_PAUSE_STORM_SOURCE_H
