/**
 * @file
 * @ingroup cosim
 * The packet that travels cosim's fabric: a small plain struct, pooled and linked intrusively.
 *
 * cosim does not use ns3::Packet on its hot path: a packet here is ~64 bytes of plain fields taken from a
 * PacketPool free list, so forwarding a packet one hop allocates nothing (htsim's design). Wire size and
 * payload are explicit fields, so nobody infers a packet's kind from its size.
 */
#ifndef COSIM_FABRIC_PACKET_H
#define COSIM_FABRIC_PACKET_H

#include "../engine/shared-codes.h"

#include <cstdint>

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
};

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
struct FabricPacket
{
    uint64_t flowId;       ///< index of the flow in the run's FlowTable
    uint64_t seqBytes;     ///< DATA: byte offset of the payload in its flow; ACK: bytes acknowledged
    int64_t sendTimePs;    ///< time the sender put the packet on the wire, in ps
    int64_t dueTimePs;     ///< while on a link: time its last bit reaches the far end, in ps
    uint32_t src;          ///< source host id
    uint32_t dst;          ///< destination host id
    uint32_t payloadBytes; ///< payload carried, in bytes (0 for control packets)
    uint32_t wireBytes;    ///< bytes serialized on a link: payload + all headers, in bytes
    uint32_t hopCount;     ///< links traversed so far
    uint32_t aux;          ///< PAUSE: pause time in quanta of 512 bit times (0 = resume)
    uint16_t ingressPort;  ///< at a switch: the port the packet arrived on (for buffer accounting)
    uint16_t qp;           ///< queue-pair index of its flow between its two hosts (FlowTable::qp; ECMP hash field)
    uint8_t bufferClass;   ///< at a switch: which part of the ingress buffer holds it (SharedBufferMmu)
    PacketKind kind;       ///< what the packet carries
    uint8_t priority;      ///< priority / traffic class, 0..kNumPriorities-1
    bool ecnMarked;        ///< ECN congestion-experienced bit
    FabricPacket* next;    ///< intrusive link for queues and the pool's free list
};

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

    /// Remove and @return the head packet (the FIFO must not be empty).
    FabricPacket* Pop()
    {
        FabricPacket* p = m_head;
        m_head = p->next;
        if (m_head == nullptr)
        {
            m_tail = nullptr;
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
