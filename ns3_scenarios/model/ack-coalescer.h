/**
 * @file
 * @ingroup cosim
 * The receiver's ACK coalescing: one ACK per so many payload bytes of a flow, and one at its last byte.
 */
#ifndef COSIM_ACK_COALESCER_H
#define COSIM_ACK_COALESCER_H

#include <cstdint>
#include <unordered_map>

namespace ns3
{

/**
 * @ingroup cosim
 * @brief Decides when a receiving NIC acknowledges: after every IntervalBytes of a flow's payload since
 * its previous ACK, and at the flow's last byte.
 *
 * Plain state owned by the HostNic, whose AckIntervalBytes attribute sets the interval.
 */
class AckCoalescer
{
  public:
    /// Acknowledge every @p bytes payload bytes of a flow (in bytes, at least 1).
    void SetIntervalBytes(uint64_t bytes)
    {
        m_intervalBytes = bytes;
    }

    /// @return payload bytes per coalesced ACK, in bytes
    uint64_t GetIntervalBytes() const
    {
        return m_intervalBytes;
    }

    /**
     * @brief @p payloadBytes of flow @p flowId arrived.
     * @param flowId the flow
     * @param payloadBytes payload of the packet, in bytes
     * @param last the packet carries the flow's last byte (its state is dropped)
     * @return true if an ACK is due now
     */
    bool OnData(uint64_t flowId, uint32_t payloadBytes, bool last)
    {
        if (last)
        {
            m_unackedBytes.erase(flowId);
            return true;
        }
        uint64_t& unacked = m_unackedBytes[flowId];
        unacked += payloadBytes;
        if (unacked < m_intervalBytes)
        {
            return false;
        }
        unacked = 0;
        return true;
    }

  private:
    uint64_t m_intervalBytes{1};                            ///< payload per coalesced ACK, in bytes
    std::unordered_map<uint64_t, uint64_t> m_unackedBytes; ///< payload since each flow's last ACK, in bytes
};

} // namespace ns3

#endif // COSIM_ACK_COALESCER_H
