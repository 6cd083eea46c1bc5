/**
 * @file
 * @ingroup cosim
 * The responder side of RoCE go-back-N loss recovery: accept only the expected PSN, NAK a gap once.
 */
#ifndef COSIM_GO_BACK_N_RECEIVER_H
#define COSIM_GO_BACK_N_RECEIVER_H

#include <cstdint>
#include <unordered_set>

namespace ns3
{

/// What the syndrome field (FabricPacket::aux) of an ACK-kind packet says, as in RoCE's AETH.
enum class AckSyndrome : uint32_t
{
    ACK = 0, ///< cumulative acknowledgement: every payload byte below seqBytes arrived in order
    NAK = 1, ///< PSN sequence error: bytes below seqBytes arrived, the packet at seqBytes did not
};

/**
 * @ingroup cosim
 * @brief Decides what a receiving NIC does with a data packet of a reliable-connection flow: deliver it
 * if it carries the expected PSN, else drop it, answering the first packet after a gap with a NAK.
 *
 * PSNs are kept as byte offsets (FabricPacket::seqBytes), so the expected PSN of a flow is its delivered
 * byte count (FlowTable::rcvdBytes) and needs no state of its own. At most one NAK per flow is
 * outstanding: after a NAK, packets beyond the gap are dropped silently until the expected one arrives
 * (the sender's retransmission timeout covers a lost NAK). Plain state owned by the HostNic.
 */
class GoBackNReceiver
{
  public:
    /// What to do with a data packet.
    enum class Verdict : uint8_t
    {
        DELIVER,   ///< the expected PSN: deliver its payload
        DUPLICATE, ///< already delivered (the sender went back further): drop, acknowledge again
        NAK,       ///< beyond a gap, first since the gap opened: drop, send a NAK for the expected PSN
        DROP,      ///< beyond a gap already NAKed: drop silently
    };

    /**
     * @brief A data packet of flow @p flowId arrived.
     * @param flowId the flow
     * @param seqBytes byte offset of its payload (its PSN)
     * @param expectedBytes payload the flow has delivered in order so far (the expected PSN)
     * @return what to do with it
     */
    Verdict OnData(uint64_t flowId, uint64_t seqBytes, uint64_t expectedBytes)
    {
        if (seqBytes == expectedBytes)
        {
            if (!m_nakOutstanding.empty())
            {
                m_nakOutstanding.erase(flowId); // the gap is filled
            }
            return Verdict::DELIVER;
        }
        if (seqBytes < expectedBytes)
        {
            return Verdict::DUPLICATE;
        }
        return m_nakOutstanding.insert(flowId).second ? Verdict::NAK : Verdict::DROP;
    }

  private:
    std::unordered_set<uint64_t> m_nakOutstanding; ///< flows with a NAK sent and their gap not yet filled
};

} // namespace ns3

#endif // COSIM_GO_BACK_N_RECEIVER_H
