#include "cts-admission.h"

#include "ns3/assert.h"

#include <algorithm>

namespace ns3
{

void
CtsAdmission::Configure(uint64_t budgetBytes, uint64_t chunkBytes)
{
    NS_ASSERT_MSG(chunkBytes > 0, "an admission grant must allow at least one byte");
    m_budgetBytes = budgetBytes;
    m_chunkBytes = chunkBytes;
}

void
CtsAdmission::Request(uint64_t flowId, uint64_t sizeBytes)
{
    NS_ASSERT_MSG(sizeBytes > 0, "flow " << flowId << " asks to send nothing");
    m_waiting.push_back(Waiting{flowId, 0, sizeBytes});
}

bool
CtsAdmission::NextGrant(uint64_t* flowId, uint64_t* grantedToBytes)
{
    if (m_waiting.empty())
    {
        return false;
    }
    Waiting w = m_waiting.front();
    const uint64_t chunk = std::min(m_chunkBytes, w.sizeBytes - w.grantedBytes);
    if (m_outstandingBytes != 0 && m_outstandingBytes + chunk > m_budgetBytes)
    {
        return false;
    }
    m_waiting.pop_front();
    w.grantedBytes += chunk;
    m_outstandingBytes += chunk;
    m_peakOutstandingBytes = std::max(m_peakOutstandingBytes, m_outstandingBytes);
    if (w.grantedBytes < w.sizeBytes)
    {
        m_waiting.push_back(w);
    }
    *flowId = w.flowId;
    *grantedToBytes = w.grantedBytes;
    return true;
}

void
CtsAdmission::Arrived(uint64_t bytes)
{
    NS_ASSERT_MSG(m_outstandingBytes >= bytes, "more payload arrived than was granted");
    m_outstandingBytes -= bytes;
}

} // namespace ns3
