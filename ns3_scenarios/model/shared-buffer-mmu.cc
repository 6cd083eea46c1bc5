#include "shared-buffer-mmu.h"

#include "ns3/assert.h"
#include "ns3/boolean.h"
#include "ns3/double.h"
#include "ns3/uinteger.h"

#include <algorithm>
#include <limits>

namespace ns3
{

NS_OBJECT_ENSURE_REGISTERED(SharedBufferMmu);

TypeId
SharedBufferMmu::GetTypeId()
{
    static TypeId tid =
        TypeId("ns3::SharedBufferMmu")
            .SetParent<Object>()
            .SetGroupName("Cosim")
            .AddConstructor<SharedBufferMmu>()
            .AddAttribute("BufferBytes",
                          "Total packet buffer of the switch, in bytes.",
                          UintegerValue(32 * 1024 * 1024),
                          MakeUintegerAccessor(&SharedBufferMmu::m_bufferBytes),
                          MakeUintegerChecker<uint64_t>(1))
            .AddAttribute("ReservedBytes",
                          "Guaranteed buffer per (ingress port, priority), in bytes.",
                          UintegerValue(8192),
                          MakeUintegerAccessor(&SharedBufferMmu::m_reservedBytes),
                          MakeUintegerChecker<uint64_t>())
            .AddAttribute("DynamicThresholdAlpha",
                          "A (port, priority) may use alpha x (free shared buffer) of the shared pool "
                          "(dimensionless).",
                          DoubleValue(1.0),
                          MakeDoubleAccessor(&SharedBufferMmu::m_alpha),
                          MakeDoubleChecker<double>(1.0 / 1024, 1024))
            .AddAttribute("XonOffsetBytes",
                          "XON is sent when shared use is this many bytes below the threshold and the "
                          "headroom is empty (hysteresis), in bytes (0 = two maximum packets).",
                          UintegerValue(0),
                          MakeUintegerAccessor(&SharedBufferMmu::m_xonOffsetBytes),
                          MakeUintegerChecker<uint64_t>())
            .AddAttribute("XoffMarginBytes",
                          "XOFF is sent when shared use comes within this many bytes of the threshold "
                          "(the next arrival could cross it), in bytes (0 = one maximum packet).",
                          UintegerValue(0),
                          MakeUintegerAccessor(&SharedBufferMmu::m_xoffMarginBytes),
                          MakeUintegerChecker<uint64_t>())
            .AddAttribute("PfcEnabled",
                          "Lossless operation: headroom and PAUSE frames (true), or drop when full (false).",
                          BooleanValue(true),
                          MakeBooleanAccessor(&SharedBufferMmu::m_pfcEnabled),
                          MakeBooleanChecker())
            .AddAttribute("LosslessPriorityMask",
                          "Bit p set: priority p is lossless (PFC pauses it and headroom is carved for it); "
                          "the other priorities are dropped when their share is full. Default: all.",
                          UintegerValue(0xff),
                          MakeUintegerAccessor(&SharedBufferMmu::m_losslessMask),
                          MakeUintegerChecker<uint8_t>());
    return tid;
}

SharedBufferMmu::SharedBufferMmu() = default;
SharedBufferMmu::~SharedBufferMmu() = default;

bool
SharedBufferMmu::Setup(const std::vector<uint64_t>& headroomBytes, uint32_t maxPacketBytes)
{
    if (m_xoffMarginBytes == 0)
    {
        m_xoffMarginBytes = maxPacketBytes;
    }
    if (m_xonOffsetBytes == 0)
    {
        m_xonOffsetBytes = 2 * uint64_t(maxPacketBytes);
    }
    const std::size_t nPorts = headroomBytes.size();
    m_headroomBytes = headroomBytes;
    if (!m_pfcEnabled)
    {
        std::fill(m_headroomBytes.begin(), m_headroomBytes.end(), 0);
    }
    // 128-bit sums: byte attributes may be set anywhere in their 64-bit range without wrapping around.
    using Wide = __int128;
    Wide carved = Wide(m_reservedBytes) * Wide(nPorts) * kNumPriorities;
    const int lossless = m_pfcEnabled ? __builtin_popcount(m_losslessMask) : 0;
    for (uint64_t h : m_headroomBytes)
    {
        carved += Wide(h) * lossless; // only lossless priorities need headroom
    }
    const Wide pool = Wide(m_bufferBytes) - carved;
    m_sharedPoolBytes = int64_t(std::min<Wide>(pool, std::numeric_limits<int64_t>::max()));
    m_sharedUsedBytes = 0;
    m_use.assign(nPorts * kNumPriorities, Use{0, 0, 0, false});
    return pool > 0;
}

BufferClass
SharedBufferMmu::Admit(uint32_t port, uint8_t prio, uint32_t bytes)
{
    const std::size_t i = Index(port, prio);
    if (m_use[i].reservedBytes + bytes <= m_reservedBytes)
    {
        m_use[i].reservedBytes += bytes;
        return BufferClass::RESERVED;
    }
    // Once paused, new arrivals are what was in flight: they belong in the headroom.
    if (!m_use[i].xoff && double(m_use[i].sharedBytes + bytes) <= SharedThresholdBytes() &&
        m_sharedUsedBytes + int64_t(bytes) <= m_sharedPoolBytes)
    {
        m_use[i].sharedBytes += bytes;
        m_sharedUsedBytes += bytes;
        NS_ASSERT_MSG(m_sharedUsedBytes <= m_sharedPoolBytes, "shared buffer use above the pool");
        return BufferClass::SHARED;
    }
    if (IsLossless(prio) && m_use[i].headroomBytes + bytes <= m_headroomBytes[port])
    {
        m_use[i].headroomBytes += bytes;
        if (m_use[i].headroomBytes > m_peakHeadroomUsed)
        {
            m_peakHeadroomUsed = m_use[i].headroomBytes;
        }
        return BufferClass::HEADROOM;
    }
    return BufferClass::DROP;
}

void
SharedBufferMmu::Release(uint32_t port, uint8_t prio, uint32_t bytes, BufferClass cls)
{
    const std::size_t i = Index(port, prio);
    switch (cls)
    {
    case BufferClass::RESERVED:
        NS_ASSERT_MSG(m_use[i].reservedBytes >= bytes, "reserved buffer of port " << port << " released below 0");
        m_use[i].reservedBytes -= bytes;
        break;
    case BufferClass::SHARED:
        NS_ASSERT_MSG(m_use[i].sharedBytes >= bytes && m_sharedUsedBytes >= int64_t(bytes),
                      "shared buffer of port " << port << " released below 0");
        m_use[i].sharedBytes -= bytes;
        m_sharedUsedBytes -= bytes;
        break;
    case BufferClass::HEADROOM:
        NS_ASSERT_MSG(m_use[i].headroomBytes >= bytes, "headroom of port " << port << " released below 0");
        m_use[i].headroomBytes -= bytes;
        break;
    default:
        break;
    }
}

bool
SharedBufferMmu::TakeXoff(uint32_t port, uint8_t prio)
{
    const std::size_t i = Index(port, prio);
    if (!IsLossless(prio) || m_use[i].xoff)
    {
        return false;
    }
    // Pause before the next full packet could overshoot the threshold, or as soon as headroom is used.
    const bool over =
        m_use[i].headroomBytes > 0 || double(m_use[i].sharedBytes) + double(m_xoffMarginBytes) > SharedThresholdBytes();
    if (over)
    {
        m_use[i].xoff = true;
    }
    return over;
}

bool
SharedBufferMmu::TakeXon(uint32_t port, uint8_t prio)
{
    const std::size_t i = Index(port, prio);
    if (!m_use[i].xoff)
    {
        return false;
    }
    const bool under = m_use[i].headroomBytes == 0 &&
                       double(m_use[i].sharedBytes) + double(m_xonOffsetBytes) <= SharedThresholdBytes();
    if (under)
    {
        m_use[i].xoff = false;
    }
    return under;
}

} // namespace ns3
