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
     * @param delayAverageWeight the NsccWindow's DelayAverageWeight (1: a marked ACK's own delay decides)
     * @param cwndOut the window after each answer, [n], in bytes
     */
    static void NsccWindowAfter(double lineRateBps,
                                int64_t mtuBytes,
                                double delayAverageWeight,
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

    /**
     * @brief Probe of a switch port's in-band telemetry (LinkTelemetry, Enabled): the port starts sending
     * @p n packets in order, packet k at @p nowPs[k] with @p wireBytes[k] bytes and @p queueBytes[k] bytes
     * left queued behind it, on a link of @p rateBps.
     * @param uOut the port's utilization after each packet, [n] (dimensionless)
     * @param codeOut the code a data packet carries out of the port, [n] (UtilizationCode)
     */
    static void LinkUtilizationAfter(double rateBps,
                                     int64_t n,
                                     const int64_t* nowPs,
                                     const int64_t* wireBytes,
                                     const int64_t* queueBytes,
                                     double* uOut,
                                     uint8_t* codeOut);

    /// @return the utilization @p u is carried as: UtilizationCode's decoding of its encoding (dimensionless)
    static double UtilizationCodeRoundTrip(double u);

    /**
     * @brief Probe of telemetry congestion control (TelemetryRateControl): a QP on a link of @p lineRateBps
     * starts at line rate and receives @p n ACKs in order: ACK k acknowledges @p ackedBytes[k] bytes when the
     * QP has sent @p sentBytes[k], and echoes utilization code @p code[k].
     * @param rateOut the QP's rate after each ACK, [n], in bit/s
     */
    static void TelemetryRateAfter(double lineRateBps,
                                   int64_t n,
                                   const uint8_t* code,
                                   const int64_t* ackedBytes,
                                   const int64_t* sentBytes,
                                   double* rateOut);

    /**
     * @brief Probe of an ns-3 simulator core alone (its own instance, not the global one): a cascade of
     * events, each of which schedules more with Schedule, ScheduleNow or ScheduleWithContext, cancels or
     * removes earlier ones, and reads the core's state, all drawn from a generator seeded with @p seed.
     * @param impl the core's TypeId name, e.g. "ns3::LeanSimulatorImpl" or "ns3::DefaultSimulatorImpl"
     * @param events how many events the cascade schedules at most
     * @param out per event run, 6 numbers: its tag, Now (ps), GetContext, GetEventCount, and what it saw of
     * an earlier event: IsExpired (0/1) and GetDelayLeft (ps); [6 * events]
     * @return events run (rows of @p out filled)
     */
    static int64_t SimulatorCascade(const std::string& impl, uint64_t seed, int64_t events, int64_t* out);

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
