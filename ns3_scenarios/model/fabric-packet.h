/**
 * @file
 * @ingroup cosim
 * The packet that travels cosim's fabric: a small plain struct, pooled and linked intrusively.
 *
 * cosim does not use ns3::Packet on its hot path: a packet here is 64 bytes of plain fields taken from a
 * PacketPool free list, so forwarding a packet one hop allocates nothing (htsim's design). Wire size and
 * payload are explicit fields, so nobody infers a packet's kind from its size.
 */
#ifndef COSIM_FABRIC_PACKET_H
#define COSIM_FABRIC_PACKET_H

#include "../engine/shared-codes.h"

#include <cstdint>
#include <climits>

namespace ns3
{

/// What a FabricPacket carries.
enum class PacketKind : uint8_t
{
    DATA = 0,  ///< payload of a flow
    ACK = 1,   ///< receiver acknowledgement (coalesced)
    CNP = 2,   ///< congestion notification packet (DCQCN)
    PAUSE = 3, ///< PFC PAUSE frame (aux: quanta; priority: the class paused)
    CREDIT = 4, ///< InfiniBand flow-control packet (aux: 64-byte blocks freed; priority: the VL)
    REQUEST = 5, ///< receiver-driven admission: a sender asks to send its flow (seqBytes: the flow's size)
    GRANT = 6,   ///< receiver-driven admission: clear-to-send up to payload offset seqBytes of the flow
    SACK = 7,    ///< Ultra Ethernet PDS ACK with its SACK bitmap (the comment below says what its fields carry)
    NACK = 8,    ///< Ultra Ethernet PDS NACK of one trimmed data packet (fields as SACK)
    /// a credit link's resend of a corrupted packet, standing in for the copy on the wire: it takes its
    /// serialization time and is discarded on arrival (the original, held at the head, is what arrives)
    LINK_RESEND = 9,
};

/**
 * How Ultra Ethernet packets use FabricPacket's fields (no field is added: a packet stays one cache line).
 *
 * - DATA: qp carries the packet's entropy value (the UDP source port a UEC sender picks per packet, which
 *   switches hash with FabricSwitch::EcmpHashFields five-tuple-qp); seqBytes is the payload's byte offset,
 *   with the PDS AR (ack request) flag in its top bit (kUecAckRequestBit: an offset never reaches it); a
 *   trimmed packet has payloadBytes 0 and keeps seqBytes, so its receiver knows which packet to NACK.
 *   The receiver learns the flow's size from the first packet's SES header (the message length), which
 *   the FlowTable stands for.
 * - SACK (the PDS ACK with its SACK extension, UEC 1.0): aux is CACK_PSN, the cumulative acknowledgement
 *   (every packet below it delivered); seqBytes is SACK_BITMAP, bit i set if packet SACK_PSN + i arrived;
 *   payloadBytes (a SACK carries no payload) holds the two 16-bit offsets from CACK_PSN of the PDS ACK
 *   header (UecSackOffsets): SACK_PSN_OFFSET (where the bitmap starts, 0..65535) and ACK_PSN_OFFSET (the
 *   packet whose arrival triggered the SACK, signed; kUecAckOffsetNone if out of range). qp echoes that
 *   packet's entropy, ecnMarked its ECN bit and sendTimePs its send time (standing for the sender's send
 *   record of it: the round-trip sample).
 * - NACK: seqBytes is the byte offset of the packet it names; aux is CACK_PSN; payloadBytes is the PDS
 *   NACK code (UecNackCode); qp, ecnMarked and sendTimePs as for a SACK.
 * - GRANT (with HostNic::UecCongestionControl rccc or both): an RCCC credit; seqBytes is the payload
 *   offset of the flow its sender may now send up to (the credit accumulated since the flow began).
 */

/// DATA (UEC): the PDS AR (ack request) flag, the top bit of seqBytes; the receiver answers such a packet at once.
constexpr uint64_t kUecAckRequestBit = uint64_t(1) << 63;
/// The PDS NACK code a UEC NACK carries (in payloadBytes).
enum UecNackCode : uint32_t
{
    kUecNackTrimmed = 0,   ///< the packet at seqBytes arrived trimmed: send it again
    kUecNackRodOutOfOrder = 1, ///< ROD: a packet beyond seqBytes arrived and was dropped: go back to seqBytes
};

/// Packets a UEC SACK_BITMAP covers (its bits).
constexpr uint32_t kUecSackBitmapPackets = 64;
/// Largest SACK_PSN_OFFSET, packets.
constexpr int64_t kUecSackOffsetMax = 0xFFFF;
/// Range of ACK_PSN_OFFSET, packets; kUecAckOffsetNone marks an ACK_PSN out of range.
constexpr int64_t kUecAckOffsetMin = -0x7FFF, kUecAckOffsetMax = 0x7FFF;
constexpr int16_t kUecAckOffsetNone = INT16_MIN;

/// @return a UEC SACK's payloadBytes field holding SACK_PSN_OFFSET @p sackOffset and ACK_PSN_OFFSET @p ackOffset
inline uint32_t
UecSackOffsets(uint16_t sackOffset, int16_t ackOffset)
{
    return uint32_t(sackOffset) | uint32_t(uint16_t(ackOffset)) << 16;
}

/// @return SACK_PSN_OFFSET of a UEC SACK's payloadBytes field @p field, packets
inline uint16_t
UecSackPsnOffset(uint32_t field)
{
    return uint16_t(field & 0xFFFF);
}

/// @return ACK_PSN_OFFSET of a UEC SACK's payloadBytes field @p field, packets (kUecAckOffsetNone: unknown)
inline int16_t
UecAckPsnOffset(uint32_t field)
{
    return int16_t(uint16_t(field >> 16));
}

/// Bytes per InfiniBand flow-control credit.
constexpr uint32_t kCreditBlockBytes = 64;

/// @return credits (64-byte blocks) a packet of @p wireBytes occupies
inline uint32_t
CreditBlocks(uint32_t wireBytes)
{
    return (wireBytes + kCreditBlockBytes - 1) / kCreditBlockBytes;
}

using cosim::kNumPriorities;

/**
 * @ingroup cosim
 * @brief One packet on the fabric. Plain data; owned by a PacketPool.
 */
struct alignas(64) FabricPacket
{
    // One cache line, laid out without padding: a hop touches the packet it forwards, and at thousands of
    // ports the packets in flight outgrow the caches.
    uint32_t flowId;       ///< index of the flow in the run's FlowTable (FlowTable::kMaxFlows bounds it)
    uint32_t src;          ///< source host id
    uint32_t dst;          ///< destination host id
    uint32_t payloadBytes; ///< payload carried, in bytes (0 for control packets)
    uint32_t wireBytes;    ///< bytes serialized on a link: payload + all headers, in bytes
    uint32_t aux;          ///< PAUSE: pause time in quanta of 512 bit times (0 = resume); DATA: intermediate
                           ///< group + 1 while routed towards it (FabricSwitch::DragonflyRouting), else 0
    uint64_t seqBytes;     ///< DATA: byte offset of the payload in its flow; ACK: bytes acknowledged
    int64_t sendTimePs{-1}; ///< time the packet started serializing on its first link, in ps (-1 before)
    /// While on a link: the time the last bit of the packet behind it on that link reaches the far end, in
    /// ps (the link holds the first packet's). Delivering a packet thus schedules the next delivery without
    /// reading the next packet.
    int64_t nextDueTimePs;
    FabricPacket* next;    ///< intrusive link for queues and the pool's free list
    uint16_t ingressPort;  ///< at a switch: the port the packet arrived on (for buffer accounting)
    uint16_t qp;           ///< queue-pair index of its flow between its two hosts (FlowTable::qp; ECMP hash field)
    uint8_t bufferClass : 7; ///< at a switch: which part of the ingress buffer holds it (SharedBufferMmu)
    bool ecnMarked : 1;      ///< ECN congestion-experienced bit
    PacketKind kind;       ///< what the packet carries
    uint8_t priority;      ///< priority / traffic class, 0..kNumPriorities-1
    /// In-band telemetry (LinkTelemetry), a UtilizationCode: DATA: the largest utilization of the switch
    /// egress ports it crossed; ACK: the code of the last data packet its receiver got (the echo)
    uint8_t pathUtilization;
};

static_assert(sizeof(FabricPacket) == 64, "a FabricPacket is one cache line");

/**
 * @ingroup cosim
 * @brief FIFO of packets linked through FabricPacket::next; O(1) push and pop, no allocation.
 */
class PacketFifo
{
  public:
    /// @return true if the FIFO holds no packet
    bool Empty() const
    {
        return m_head == nullptr;
    }

    /// @return the packet at the head, or nullptr
    FabricPacket* Front() const
    {
        return m_head;
    }

    /// @return the packet at the tail, or nullptr
    FabricPacket* Back() const
    {
        return m_tail;
    }

    /// @return number of wire bytes queued, in bytes
    uint64_t Bytes() const
    {
        return m_bytes;
    }

    /// @return number of packets queued
    uint32_t Packets() const
    {
        return m_packets;
    }

    /// Append @p p at the tail.
    void Push(FabricPacket* p)
    {
        p->next = nullptr;
        if (m_tail)
        {
            m_tail->next = p;
        }
        else
        {
            m_head = p;
        }
        m_tail = p;
        m_bytes += p->wireBytes;
        ++m_packets;
    }

    /// Move every packet of @p other, in its order, ahead of this FIFO's head; @p other is left empty.
    void PrependAll(PacketFifo& other)
    {
        if (other.m_head == nullptr)
        {
            return;
        }
        other.m_tail->next = m_head;
        if (m_head == nullptr)
        {
            m_tail = other.m_tail;
        }
        m_head = other.m_head;
        m_bytes += other.m_bytes;
        m_packets += other.m_packets;
        other = PacketFifo();
    }

    /// Remove and @return the head packet (the FIFO must not be empty).
    FabricPacket* Pop()
    {
        FabricPacket* p = m_head;
        m_head = p->next;
        if (m_head == nullptr)
        {
            m_tail = nullptr;
        }
        else
        {
            // The new head leaves a serialization from now (a port's queue or its link): by then a port
            // of a wide fabric has evicted its line, which the pop and the delivery both read.
            __builtin_prefetch(m_head);
        }
        m_bytes -= p->wireBytes;
        --m_packets;
        p->next = nullptr;
        return p;
    }

  private:
    FabricPacket* m_head{nullptr}; ///< oldest packet
    FabricPacket* m_tail{nullptr}; ///< newest packet
    uint64_t m_bytes{0};           ///< wire bytes queued, in bytes
    uint32_t m_packets{0};         ///< packets queued
};

} // namespace ns3

#endif // COSIM_FABRIC_PACKET_H
