/**
 * @file
 * @ingroup cosim
 * The receiver's ACK coalescing: one ACK per so many payload bytes of a flow, and one at its last byte.
 */
#ifndef COSIM_ACK_COALESCER_H
#define COSIM_ACK_COALESCER_H

#include <cstdint>

namespace ns3
{

/**
 * @ingroup cosim
 * @brief Decides when a receiving NIC acknowledges: after every IntervalBytes of a flow's payload since
 * its previous ACK, and at the flow's last byte.
 *
 * Owned by the HostNic, whose AckIntervalBytes attribute sets the interval; each flow's count lives in
 * the run's FlowTable.
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
     * @brief @p payloadBytes of a flow arrived.
     * @param unackedBytes the flow's payload since its previous ACK (FlowTable::unackedBytes), in bytes;
     * updated
     * @param payloadBytes payload of the packet, in bytes
     * @param last the packet carries the flow's last byte (its count is reset)
     * @return true if an ACK is due now
     */
    bool OnData(uint64_t& unackedBytes, uint32_t payloadBytes, bool last) const
    {
        if (last)
        {
            unackedBytes = 0;
            return true;
        }
        unackedBytes += payloadBytes;
        if (unackedBytes < m_intervalBytes)
        {
            return false;
        }
        unackedBytes = 0;
        return true;
    }

  private:
    uint64_t m_intervalBytes{1}; ///< payload per coalesced ACK, in bytes
};

} // namespace ns3

#endif // COSIM_ACK_COALESCER_H
