/**
 * @file
 * @ingroup cosim
 * Which packet fields a switch's ECMP hash reads, and the hash itself.
 */
#ifndef COSIM_ECMP_HASH_H
#define COSIM_ECMP_HASH_H

#include "fabric-packet.h"

#include <cstdint>

namespace ns3
{

/// The header fields an ECMP hash covers (FabricSwitch::EcmpHashFields).
enum class EcmpHashFields : uint8_t
{
    /// Each flow (each message) hashes alone, as if every message had its own UDP source port: the
    /// most entropy a fabric can get, far more than RDMA NICs give.
    FLOW = 0,
    /// The 5-tuple of a RoCEv2 packet with one UDP source port per host pair: every queue pair between two
    /// hosts takes the same path (the low entropy of training traffic).
    FIVE_TUPLE = 1,
    /// The 5-tuple and the destination queue pair of the BTH ("enhanced ECMP"): the k queue pairs of a
    /// host pair (HostNic::QueuePairsPerConnection) take up to k paths.
    FIVE_TUPLE_QP = 2,
};

/// 64-bit finalizer of MurmurHash3: cheap and well mixed, so consecutive keys spread evenly.
inline uint64_t
Mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

/**
 * @brief The ECMP hash of @p p at one switch.
 * @param p the packet
 * @param fields which of its fields the hash covers
 * @param salt per switch and run (EcmpSeed and node id), so switches of one run choose independently
 * @return the hash; the candidate taken is hash mod the number of equal-cost ports
 */
inline uint64_t
EcmpHash(const FabricPacket& p, EcmpHashFields fields, uint64_t salt)
{
    constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL; // 2^64 / golden ratio: spreads small keys
    uint64_t key = p.flowId;
    if (fields != EcmpHashFields::FLOW)
    {
        key = Mix64(uint64_t(p.src) << 32 | p.dst);
        if (fields == EcmpHashFields::FIVE_TUPLE_QP && p.qp != 0)
        {
            key = Mix64(key + p.qp); // QP 0 hashes as the plain 5-tuple: one QP per pair changes no path
        }
    }
    return Mix64(key * kGolden ^ salt);
}

} // namespace ns3

#endif // COSIM_ECMP_HASH_H
