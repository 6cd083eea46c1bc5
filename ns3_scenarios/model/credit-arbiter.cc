#include "credit-arbiter.h"

#include <regex>

#include "ns3/abort.h"

#include <sstream>

namespace ns3
{

void
CreditArbiter::Init(uint32_t initialBlocks, uint32_t peerCapacityBlocks, uint32_t maxPacketBytes, uint32_t dataVls)
{
    NS_ASSERT_MSG(initialBlocks <= peerCapacityBlocks, "initial credits above the peer's buffer");
    m_dataVls = dataVls;
    m_peerCapacityBlocks = peerCapacityBlocks;
    m_credits.fill(initialBlocks);
    m_maxPacketBlocks = CreditBlocks(maxPacketBytes);
    m_lowCreditMask = m_credits[0] < m_maxPacketBlocks ? 0xff : 0;
    m_vlPrios.fill(0);
    for (uint32_t prio = 0; prio < kNumPriorities; ++prio)
    {
        m_vlPrios[prio % m_dataVls] |= uint8_t(1u << prio);
    }
}

void
CreditArbiter::SetWeights(const std::string& weights)
{
    std::stringstream in(weights);
    std::string item;
    m_vlWeight.fill(64);
    for (uint32_t vl = 0; vl < kNumPriorities && std::getline(in, item, ','); ++vl)
    {
        const unsigned long w = std::stoul(item);
        NS_ABORT_MSG_IF(w == 0 || w > 255, "VlArbitrationWeights entries are 1..255 (units of 64 bytes)");
        m_vlWeight[vl] = uint32_t(w);
    }
}

std::string
CreditArbiter::WeightsProblem(const std::string& weights)
{
    static const std::regex item(R"(\s*[0-9]{1,3}\s*)");
    std::stringstream in(weights);
    std::string w;
    uint32_t n = 0;
    while (std::getline(in, w, ','))
    {
        if (!std::regex_match(w, item) || std::stoul(w) == 0 || std::stoul(w) > 255)
        {
            return "entry '" + w + "' is not an integer 1..255 (units of 64 bytes)";
        }
        ++n;
    }
    if (n == 0 || n > kNumPriorities)
    {
        return "needs 1.." + std::to_string(kNumPriorities) + " comma-separated weights, got " + std::to_string(n);
    }
    return "";
}

std::string
CreditArbiter::GetWeights() const
{
    std::string out;
    for (uint32_t vl = 0; vl < kNumPriorities; ++vl)
    {
        out += (vl ? "," : "") + std::to_string(m_vlWeight[vl]);
    }
    return out;
}

void
CreditArbiter::NextTurn(uint32_t ready)
{
    uint32_t vl = m_arbVl;
    do
    {
        vl = (vl + 1) % m_dataVls;
    } while (!(ready & (1u << vl)));
    m_arbVl = uint8_t(vl);
    m_arbBudgetBytes = int64_t(m_vlWeight[vl]) * kCreditBlockBytes;
}

uint8_t
CreditArbiter::UpdateStalls(const std::array<PacketFifo, kNumPriorities>& queues,
                            const PacketSource* source,
                            int64_t nowPs)
{
    uint8_t stalled = 0;
    for (uint32_t bits = m_lowCreditMask & ((1u << m_dataVls) - 1); bits != 0; bits &= bits - 1)
    {
        const uint32_t vl = uint32_t(__builtin_ctz(bits)); // a lane with credits for any packet never stalls
        const PacketFifo& q = queues[vl];
        uint64_t need = q.Empty() ? 0 : CreditBlocks(q.Front()->wireBytes);
        if (need == 0 && source != nullptr)
        {
            need = source->HasPending(m_vlPrios[vl]) ? m_maxPacketBlocks : 0;
        }
        if (need > m_credits[vl])
        {
            stalled |= uint8_t(1u << vl);
        }
    }
    const uint8_t changed = stalled ^ m_stalledMask;
    for (uint32_t bits = changed; bits != 0; bits &= bits - 1)
    {
        const uint32_t vl = uint32_t(__builtin_ctz(bits));
        if (stalled & (1u << vl))
        {
            m_stallStartPs[vl] = nowPs;
        }
        else
        {
            m_stallPs[vl] += nowPs - m_stallStartPs[vl];
        }
    }
    m_stalledMask = stalled;
    return changed;
}

} // namespace ns3
