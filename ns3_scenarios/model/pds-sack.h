/**
 * @file
 * @ingroup cosim
 * What a UEC sender learns from one coalesced SACK: the PDS ACK's fields as they travel in a FabricPacket,
 * and their effect on the flow's scoreboard and entropy feedback.
 */
#ifndef COSIM_PDS_SACK_H
#define COSIM_PDS_SACK_H

#include "entropy-selector.h"
#include "fabric-packet.h"
#include "pds-scoreboard.h"

#include <cstdint>

namespace ns3
{

/// The fields of one UEC PDS SACK (UEC 1.0), decoded from its FabricPacket.
struct PdsSack
{
    uint64_t cackPsn; ///< CACK_PSN: every packet below it delivered
    int64_t sackPsn;  ///< the packet of SACK_BITMAP's bit 0 (CACK_PSN + SACK_PSN_OFFSET)
    uint64_t bitmap;  ///< SACK_BITMAP: bit i set if packet sackPsn + i arrived
    int64_t ackPsn;   ///< ACK_PSN: the packet whose arrival triggered the SACK (-1: not carried)
    bool ecn;         ///< that packet arrived ECN-marked
    uint16_t entropy; ///< that packet's entropy value (echoed)
};

/// @return the PDS SACK fields carried by @p p (a PacketKind::SACK; see fabric-packet.h)
inline PdsSack
DecodeSack(const FabricPacket& p)
{
    const int16_t ackOffset = UecAckPsnOffset(p.payloadBytes);
    return PdsSack{p.aux,
                   int64_t(p.aux) + int64_t(UecSackPsnOffset(p.payloadBytes)),
                   p.seqBytes,
                   ackOffset == kUecAckOffsetNone ? -1 : int64_t(p.aux) + ackOffset,
                   p.ecnMarked,
                   p.qp};
}

/// What one SACK acknowledged: the bytes that leave the flow's in-flight count and the marked part of them
/// (the triggering packet's, if this SACK is what shows it delivered).
struct SackOutcome
{
    uint64_t ackedBytes;  ///< payload newly known delivered that was in flight, in bytes
    uint64_t markedBytes; ///< of which the ECN-marked packet's, in bytes (NSCC's marked bytes)
};

/**
 * @brief Apply SACK @p s at @p nowPs (ps) to a flow's scoreboard @p pds and entropy state @p entropy.
 *
 * The SACK acknowledges the packet that triggered it (ACK_PSN) as well as CACK_PSN and the bitmap: a bitmap
 * that starts at CACK_PSN (after an AR packet or a duplicate) may not reach it. A receiver SACKs an
 * ECN-marked packet on arrival, so of the packets one SACK newly acknowledges only the triggering one can
 * be marked: every other one came through clean and its entropy, which
 * the scoreboard kept from its transmission, is recycled (REPS), as a SACK per packet would have done;
 * the marked packet's entropy (echoed in the SACK) is retired for the selector's hold time.
 */
inline SackOutcome
ApplySack(PdsScoreboard& pds, const EntropySelector& selector, EntropyState& entropy, const PdsSack& s, int64_t nowPs)
{
    uint64_t marked = 0;
    const auto onDelivered = [&](uint64_t index, uint16_t value, bool inFlight) {
        if (!(s.ecn && int64_t(index) == s.ackPsn))
        {
            selector.OnFeedback(entropy, value, false, nowPs);
        }
        else if (inFlight)
        {
            marked = pds.PayloadOf(index);
        }
    };
    uint64_t acked = pds.OnSack(s.cackPsn, s.sackPsn, s.bitmap, onDelivered);
    if (s.ackPsn >= 0 && (s.ackPsn < s.sackPsn || s.ackPsn >= s.sackPsn + int64_t(kUecSackBitmapPackets)))
    {
        acked += pds.OnSack(s.cackPsn, s.ackPsn, 1, onDelivered); // ACK_PSN is delivered, bitmap or not
    }
    if (s.ecn)
    {
        selector.OnFeedback(entropy, s.entropy, true, nowPs);
    }
    return SackOutcome{acked, marked};
}

} // namespace ns3

#endif // COSIM_PDS_SACK_H
