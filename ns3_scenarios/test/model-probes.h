/**
 * @file
 * @ingroup cosim
 * Unit probes of single models, for the tests: each builds one model alone and reports what it computes,
 * so a test can check it against a closed form without running a fabric.
 *
 * Like the engine header, this header includes no ns-3 header, so cppyy parses it in milliseconds; the
 * probes are compiled into libcosim-ns3 beside the engine.
 */
#ifndef COSIM_MODEL_PROBES_H
#define COSIM_MODEL_PROBES_H

#include <cstdint>
#include <string>

namespace cosim
{

/**
 * @brief Test probes of the ECN marker and of the DCQCN reaction point (attribute defaults apply).
 */
class ModelProbes
{
  public:
    /**
     * @brief Probe of the ECN marker (the DCQCN congestion point).
     * @param rateBps rate of the switch port, in bit/s
     * @param queueBytes egress queue the data packets join, in bytes
     * @param trials packets decided
     * @param seed seed of ns-3's random streams
     * @return the fraction of @p trials data packets the switch marks
     */
    static double EcnMarkFraction(double rateBps, int64_t queueBytes, int64_t trials, uint64_t seed);

    /**
     * @brief Probe of the DCQCN reaction point: a QP at rate @p rateBps (target the same) with @p alpha
     * receives one CNP, then @p steps periods pass, each with @p bytesPerStep bytes sent, one
     * rate-increase timer expiry and one alpha update.
     * @param lineRateBps line rate, in bit/s
     * @param rateBps rate before the CNP, in bit/s
     * @param alpha alpha before the CNP (dimensionless)
     * @param steps periods simulated after the CNP
     * @param bytesPerStep bytes sent in each period, in bytes
     * @param rateOut current rate after the CNP and after each step, [steps + 1], in bit/s
     * @param targetOut target rate, same layout, in bit/s
     * @param alphaOut alpha, same layout (dimensionless)
     */
    static void DcqcnAfterCnp(double lineRateBps,
                              double rateBps,
                              double alpha,
                              int64_t steps,
                              int64_t bytesPerStep,
                              double* rateOut,
                              double* targetOut,
                              double* alphaOut);

    /**
     * @brief Probe of NSCC (UEC's sender window): a flow on a link of @p lineRateBps with packets of
     * @p mtuBytes payload starts at its largest window, then receives @p n answers in order: answer k
     * arrives at @p nowPs[k], acknowledges @p ackedBytes[k] bytes whose data packet had a round trip of
     * @p rttPs[k] and carried ECN @p ecn[k] (0/1), or is a NACK of a trimmed packet if @p nack[k] is 1.
     * @param cwndOut the window after each answer, [n], in bytes
     */
    static void NsccWindowAfter(double lineRateBps,
                                int64_t mtuBytes,
                                int64_t n,
                                const int64_t* nowPs,
                                const int64_t* ackedBytes,
                                const int64_t* rttPs,
                                const uint8_t* ecn,
                                const uint8_t* nack,
                                double* cwndOut);

    /**
     * @brief Probe of one coalesced UEC SACK at its sender (PdsScoreboard, EntropySelector with its
     * default ring of 32 and a 10 us hold, flow 0 so entropies count from 0): packets 0..@p sent - 1 of
     * @p mtuBytes each go out once, packet i with entropy @p entropies[i], then one SACK arrives
     * (CACK_PSN @p cackPsn, SACK_PSN @p sackPsn, SACK_BITMAP @p bitmap, ACK_PSN @p ackPsn marked if
     * @p ecn, echoing entropy @p entropies[@p ackPsn]).
     * @param out [2 + @p nextCount]: the bytes it acknowledged, the marked bytes among them, then the
     * entropies of the next @p nextCount packets the flow would send
     */
    static void PdsSackFeedback(int64_t mtuBytes,
                                int64_t sent,
                                const uint16_t* entropies,
                                int64_t cackPsn,
                                int64_t sackPsn,
                                uint64_t bitmap,
                                int64_t ackPsn,
                                bool ecn,
                                int64_t nextCount,
                                int64_t* out);

    /// SchedulerScript step kinds.
    enum SchedulerStep : uint8_t
    {
        kInsert = 0,     ///< insert the event (ts, uid)
        kRemoveNext = 1, ///< remove the earliest event
        kPeekNext = 2,   ///< look at the earliest event
        kRemove = 3,     ///< remove the pending event (ts, uid), as Simulator::Remove does
    };

    /**
     * @brief Probe of an ns-3 event scheduler alone: play a script of steps on it, as the simulator would
     * (events carry no implementation; the scheduler never runs them).
     * @param scheduler the scheduler as ns-3 ObjectFactory text, e.g. "ns3::TimingWheelScheduler" or
     * "ns3::TimingWheelScheduler[Buckets=64|BucketWidth=1ns]"; throws std::invalid_argument if not one
     * @param step SchedulerStep per step
     * @param ts per step: the event's timestamp for kInsert and kRemove, in time steps (ps)
     * @param uid per step: the event's uid for kInsert and kRemove
     * @param n steps
     * @param out per step: the uid removed or peeked (kRemoveNext, kPeekNext), -1 for the other steps, and
     * -2 for a kRemoveNext or kPeekNext on an empty scheduler (then skipped)
     * @return events still pending at the end
     */
    static int64_t SchedulerScript(const std::string& scheduler,
                                   const uint8_t* step,
                                   const uint64_t* ts,
                                   const uint32_t* uid,
                                   int64_t n,
                                   int64_t* out);
};

} // namespace cosim

#endif // COSIM_MODEL_PROBES_H
