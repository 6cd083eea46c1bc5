#include "pds-scoreboard.h"

#include "ns3/assert.h"

#include <algorithm>

namespace ns3
{

void
PdsScoreboard::Configure(uint64_t sizeBytes, uint32_t mtuBytes)
{
    NS_ASSERT_MSG(mtuBytes > 0, "a PDS scoreboard needs a positive MTU");
    m_sizeBytes = sizeBytes;
    m_mtuBytes = mtuBytes;
    m_packets = (sizeBytes + mtuBytes - 1) / mtuBytes;
}

uint32_t
PdsScoreboard::PayloadOf(uint64_t index) const
{
    NS_ASSERT_MSG(index < m_packets, "packet " << index << " is beyond the flow's " << m_packets);
    const uint64_t offset = index * m_mtuBytes;
    const uint64_t left = m_sizeBytes - offset;
    return left < m_mtuBytes ? static_cast<uint32_t>(left) : m_mtuBytes;
}

bool
PdsScoreboard::Next(uint64_t* index, bool* retransmission)
{
    // Lost packets first (they hold the receiver's cumulative point back); skip those answered since.
    while (!m_retransmit.empty())
    {
        const uint64_t i = m_retransmit.front();
        if (i >= m_base && m_entries[i - m_base].state == State::LOST)
        {
            *index = i;
            *retransmission = true;
            return true;
        }
        m_retransmit.pop_front();
    }
    if (m_nextNew < m_packets)
    {
        *index = m_nextNew;
        *retransmission = false;
        return true;
    }
    return false;
}

void
PdsScoreboard::OnSent(uint64_t index, bool retransmission, int64_t nowPs, uint16_t entropy)
{
    if (retransmission)
    {
        NS_ASSERT_MSG(!m_retransmit.empty() && m_retransmit.front() == index,
                      "retransmitted packet " << index << " is not the head of the retransmit list");
        m_retransmit.pop_front();
        Entry& e = m_entries[index - m_base];
        NS_ASSERT_MSG(e.state == State::LOST, "packet " << index << " resent but not lost");
        e = Entry{nowPs, entropy, State::IN_FLIGHT, true};
    }
    else
    {
        NS_ASSERT_MSG(index == m_nextNew, "new packet " << index << " is not the next one " << m_nextNew);
        m_entries.push_back(Entry{nowPs, entropy, State::IN_FLIGHT, false});
        ++m_nextNew;
    }
    m_inflightBytes += PayloadOf(index);
}

uint64_t
PdsScoreboard::AdvanceBase(uint64_t cumulativePackets)
{
    uint64_t freed = 0;
    while (!m_entries.empty() && (m_base < cumulativePackets || m_entries.front().state == State::ACKED))
    {
        if (m_entries.front().state == State::IN_FLIGHT)
        {
            freed += PayloadOf(m_base); // delivered, its own SACK lost or still on its way
        }
        m_entries.pop_front();
        ++m_base;
    }
    NS_ASSERT_MSG(m_inflightBytes >= freed, "acknowledged more bytes than in flight");
    m_inflightBytes -= freed;
    return freed;
}

void
PdsScoreboard::MarkLost(uint64_t index)
{
    Entry& e = m_entries[index - m_base];
    NS_ASSERT_MSG(e.state == State::IN_FLIGHT, "packet " << index << " declared lost but not in flight");
    const uint32_t bytes = PayloadOf(index);
    NS_ASSERT_MSG(m_inflightBytes >= bytes, "lost more bytes than in flight");
    m_inflightBytes -= bytes;
    e.state = State::LOST;
    m_retransmit.push_back(index);
}

bool
PdsScoreboard::OnNack(uint64_t index, uint64_t cumulativePackets)
{
    AdvanceBase(cumulativePackets);
    if (index < m_base || index >= m_nextNew || m_entries[index - m_base].state != State::IN_FLIGHT)
    {
        return false; // delivered, or already queued again
    }
    MarkLost(index);
    return true;
}

uint64_t
PdsScoreboard::GoBack(uint64_t index, uint64_t cumulativePackets)
{
    AdvanceBase(cumulativePackets);
    uint64_t lost = 0;
    for (uint64_t i = std::max(index, m_base); i < m_nextNew; ++i)
    {
        if (m_entries[i - m_base].state == State::IN_FLIGHT)
        {
            MarkLost(i);
            ++lost;
        }
    }
    // The receiver takes only the next packet in order: resend the lost ones lowest first, whatever the
    // order in which they were found lost.
    m_retransmit.clear();
    for (uint64_t i = m_base; i < m_nextNew; ++i)
    {
        if (m_entries[i - m_base].state == State::LOST)
        {
            m_retransmit.push_back(i);
        }
    }
    return lost;
}

uint64_t
PdsScoreboard::DetectLoss(int64_t ackedSentPs, int64_t windowPs)
{
    uint64_t lost = 0;
    for (uint64_t i = m_base; i < m_nextNew; ++i)
    {
        const Entry& e = m_entries[i - m_base];
        if (e.state != State::IN_FLIGHT)
        {
            continue;
        }
        if (e.sentPs + windowPs >= ackedSentPs)
        {
            if (e.resent)
            {
                continue;
            }
            break;
        }
        MarkLost(i);
        ++lost;
    }
    return lost;
}

uint64_t
PdsScoreboard::OnTimeout(int64_t nowPs, int64_t timeoutPs, int64_t* nextDeadlinePs)
{
    uint64_t lost = 0;
    int64_t next = -1;
    for (uint64_t i = m_base; i < m_nextNew; ++i)
    {
        const Entry& e = m_entries[i - m_base];
        if (e.state != State::IN_FLIGHT)
        {
            continue;
        }
        if (e.sentPs + timeoutPs <= nowPs)
        {
            MarkLost(i);
            ++lost;
        }
        else if (next < 0 || e.sentPs + timeoutPs < next)
        {
            next = e.sentPs + timeoutPs;
        }
    }
    *nextDeadlinePs = next;
    return lost;
}

} // namespace ns3
