/**
 * @file
 * @ingroup cosim
 * Receiver-driven admission: a receiving NIC grants its senders clear-to-send chunk by chunk, keeping
 * the bytes granted but not yet arrived within a budget.
 */
#ifndef COSIM_CTS_ADMISSION_H
#define COSIM_CTS_ADMISSION_H

#include <cstdint>
#include <deque>

namespace ns3
{

/**
 * @ingroup cosim
 * @brief The receiver's side of clear-to-send admission, as collective libraries run it over RDMA: a
 * sender writes into a receive buffer only once the receiver has posted it (NCCL's channels x buffer,
 * one slot per step).
 *
 * Senders ask once per flow (a REQUEST packet); the receiver grants one chunk at a time (a GRANT carries
 * the payload offset the sender may send up to) while the bytes granted and not yet arrived stay within
 * the budget, serving the waiting flows round robin. A grant is never withheld when nothing is
 * outstanding, so a chunk larger than the budget still goes. The bytes in flight towards a receiver, and
 * hence the queue at its switch port, are bounded by the budget plus one chunk. Plain state owned by the
 * HostNic.
 */
class CtsAdmission
{
  public:
    /**
     * @brief Set the budget and the grant size.
     * @param budgetBytes most payload granted and not yet arrived, over all senders, in bytes
     * @param chunkBytes payload one grant allows, in bytes (at least 1)
     */
    void Configure(uint64_t budgetBytes, uint64_t chunkBytes);

    /// Flow @p flowId of @p sizeBytes (more than 0) asks to send.
    void Request(uint64_t flowId, uint64_t sizeBytes);

    /**
     * @brief Take the next grant the budget allows now.
     * @param[out] flowId the flow granted
     * @param[out] grantedToBytes the payload offset it may now send up to, in bytes
     * @return false if no flow waits or the next chunk does not fit the budget
     */
    bool NextGrant(uint64_t* flowId, uint64_t* grantedToBytes);

    /// @p bytes of granted payload arrived (each byte counted once).
    void Arrived(uint64_t bytes);

    /// @return payload granted and not yet arrived, in bytes
    uint64_t GetOutstandingBytes() const
    {
        return m_outstandingBytes;
    }

    /// @return the largest GetOutstandingBytes() so far, in bytes
    uint64_t GetPeakOutstandingBytes() const
    {
        return m_peakOutstandingBytes;
    }

  private:
    /// A flow with payload not yet granted.
    struct Waiting
    {
        uint64_t flowId;       ///< the flow
        uint64_t grantedBytes; ///< payload granted so far, in bytes
        uint64_t sizeBytes;    ///< the flow's payload, in bytes
    };

    std::deque<Waiting> m_waiting;      ///< flows to grant, round robin (the front is next)
    uint64_t m_budgetBytes{0};          ///< most payload outstanding, in bytes
    uint64_t m_chunkBytes{1};           ///< payload per grant, in bytes
    uint64_t m_outstandingBytes{0};     ///< granted and not yet arrived, in bytes
    uint64_t m_peakOutstandingBytes{0}; ///< high-water mark of m_outstandingBytes, in bytes
};

} // namespace ns3

#endif // COSIM_CTS_ADMISSION_H
