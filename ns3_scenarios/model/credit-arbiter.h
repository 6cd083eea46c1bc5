/**
 * @file
 * @ingroup cosim
 * The credit side of an egress port (InfiniBand): credits per virtual lane, weighted round robin among
 * the lanes that hold enough of them, and credit-stall bookkeeping.
 */
#ifndef COSIM_CREDIT_ARBITER_H
#define COSIM_CREDIT_ARBITER_H

#include "fabric-packet.h"
#include "packet-source.h"

#include "ns3/assert.h"

#include <array>
#include <cstdint>
#include <string>

namespace ns3
{

/**
 * @ingroup cosim
 * @brief Egress arbitration under credit-based link flow control: a lane sends only what the peer's input
 * buffer has room for (credits of 64-byte blocks), lanes take turns of their VLArbitration weight, and a
 * lane with data waiting but too few credits is credit-stalled.
 *
 * Plain state owned by the EgressPort, which owns the queues and fires the stall trace.
 */
class CreditArbiter
{
  public:
    /**
     * @brief Start with the credits the peer advertises.
     * @param initialBlocks credits every lane starts with (the peer's reservation per lane), in 64-byte blocks
     * @param peerCapacityBlocks the peer's whole input buffer of the link: no lane ever holds more credits
     * @param maxPacketBytes largest wire packet a source behind the port sends, in bytes
     * @param dataVls data lanes; priority p uses lane p mod dataVls
     */
    void Init(uint32_t initialBlocks, uint32_t peerCapacityBlocks, uint32_t maxPacketBytes, uint32_t dataVls);

    /// Parse comma-separated lane weights (units of 64 bytes per turn, 1..255; missing ones are 64).
    void SetWeights(const std::string& weights);

    /**
     * @brief Why @p weights cannot be VlArbitrationWeights (comma-separated integers 1..255, at most one
     * per priority), or "" if it can; checked before the attribute is set, since SetWeights aborts.
     */
    static std::string WeightsProblem(const std::string& weights);

    /// @return the lane weights, comma-separated
    std::string GetWeights() const;

    /**
     * @brief Pick the lane to serve among queued lanes whose head packet fits their credits.
     * @param queues the port's queues, indexed by lane
     * @param nonEmptyMask bit v: queues[v] holds a packet
     * @return the lane, or -1 if none can send (call Served with the popped packet's size after a pick)
     */
    int PickLane(const std::array<PacketFifo, kNumPriorities>& queues, uint8_t nonEmptyMask)
    {
        uint32_t ready = 0;
        for (uint32_t bits = nonEmptyMask; bits != 0; bits &= bits - 1)
        {
            const uint32_t vl = uint32_t(__builtin_ctz(bits));
            if (CreditBlocks(queues[vl].Front()->wireBytes) <= m_credits[vl])
            {
                ready |= 1u << vl;
            }
        }
        if (ready == 0)
        {
            return -1;
        }
        if (!(ready & (1u << m_arbVl)) || m_arbBudgetBytes <= 0)
        {
            NextTurn(ready);
        }
        return m_arbVl;
    }

    /// The picked lane sent a packet of @p wireBytes (bytes) from its queue: charge its turn.
    void Served(uint32_t wireBytes)
    {
        m_arbBudgetBytes -= wireBytes;
    }

    /// @return the priorities whose lane cannot take a full packet now (the source must hold them back)
    uint8_t BlockedPriorities() const
    {
        uint8_t blocked = 0;
        for (uint32_t bits = m_lowCreditMask; bits != 0; bits &= bits - 1)
        {
            blocked |= m_vlPrios[__builtin_ctz(bits)];
        }
        return blocked;
    }

    /// Lane @p vl sends a packet of @p blocks 64-byte blocks: take its credits.
    void Charge(uint8_t vl, uint32_t blocks)
    {
        NS_ASSERT_MSG(m_credits[vl] >= blocks,
                      "lane " << int(vl) << " sends " << blocks << " blocks holding " << m_credits[vl] << " credits");
        m_credits[vl] -= blocks;
        if (m_credits[vl] < m_maxPacketBlocks)
        {
            m_lowCreditMask |= uint8_t(1u << vl);
        }
    }

    /// The peer freed @p blocks 64-byte blocks of lane @p vl.
    void Add(uint8_t vl, uint32_t blocks)
    {
        NS_ASSERT_MSG(m_credits[vl] + blocks <= m_peerCapacityBlocks,
                      "lane " << int(vl) << " credited beyond the peer's buffer of " << m_peerCapacityBlocks
                              << " blocks");
        m_credits[vl] += blocks;
        if (m_credits[vl] >= m_maxPacketBlocks)
        {
            m_lowCreditMask &= uint8_t(~(1u << vl));
        }
    }

    /// @return true if some lane is short of credits or stalled (only then can a stall begin or end)
    bool MayStallChange() const
    {
        return (m_lowCreditMask | m_stalledMask) != 0;
    }

    /**
     * @brief Recompute which lanes are stalled: data waiting (queued, or at @p source for the lane's
     * priorities) needs more credits than the lane holds.
     * @param queues the port's queues, indexed by lane
     * @param source the port's packet source (may be null)
     * @param nowPs the current time, in ps
     * @return bit v set: lane v began or ended a stall (IsStalled tells which)
     */
    uint8_t UpdateStalls(const std::array<PacketFifo, kNumPriorities>& queues,
                         const PacketSource* source,
                         int64_t nowPs);

    /// @return true if lane @p vl is credit-stalled
    bool IsStalled(uint8_t vl) const
    {
        return m_stalledMask & (1u << vl);
    }

    /// @return credits (64-byte blocks) held for lane @p vl
    uint64_t GetCredits(uint8_t vl) const
    {
        return m_credits[vl];
    }

    /// @return total time lane @p vl was stalled up to @p nowPs (an ongoing stall included), in ps
    int64_t GetStallPs(uint8_t vl, int64_t nowPs) const
    {
        return m_stallPs[vl] + (IsStalled(vl) ? nowPs - m_stallStartPs[vl] : 0);
    }

  private:
    /// Give the next lane of @p ready in round-robin order a fresh turn of its weight.
    void NextTurn(uint32_t ready);

    uint32_t m_dataVls{1};                                ///< data lanes
    std::array<uint32_t, kNumPriorities> m_vlWeight{};    ///< WRR weight per lane, in 64-byte units
    std::array<uint64_t, kNumPriorities> m_credits{};     ///< credits held per lane, in 64-byte blocks
    uint64_t m_peerCapacityBlocks{0};                     ///< the peer's input buffer of the link, in 64-byte blocks
    uint32_t m_maxPacketBlocks{0};                        ///< credits a full packet needs
    std::array<uint8_t, kNumPriorities> m_vlPrios{};      ///< priorities that map to each lane
    uint8_t m_arbVl{0};                                   ///< lane the arbiter is serving
    int64_t m_arbBudgetBytes{0};                          ///< bytes the lane may still send this turn
    uint8_t m_stalledMask{0};                             ///< bit v: lane v is credit-stalled
    uint8_t m_lowCreditMask{0};                           ///< bit v: lane v holds less than a full packet
    std::array<int64_t, kNumPriorities> m_stallStartPs{}; ///< start of the ongoing stall, in ps
    std::array<int64_t, kNumPriorities> m_stallPs{};      ///< finished stall time, in ps
};

} // namespace ns3

#endif // COSIM_CREDIT_ARBITER_H
