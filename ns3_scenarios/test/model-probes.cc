#include "model-probes.h"

#include "../engine/shared-codes.h"
#include "../helper/picosecond-resolution.h"
#include "../model/dcqcn-rate-control.h"
#include "../model/egress-port.h"
#include "../model/fabric-switch.h"

#include "ns3/rng-seed-manager.h"

namespace cosim
{

using namespace ns3;

double
ModelProbes::EcnMarkFraction(double rateBps, int64_t queueBytes, int64_t trials, uint64_t seed)
{
    EnsurePicosecondResolution();
    RngSeedManager::SetSeed(static_cast<uint32_t>(seed % 4294967295ull) + 1);
    Ptr<FabricSwitch> sw = CreateObject<FabricSwitch>();
    Ptr<EgressPort> port = CreateObject<EgressPort>();
    port->SetDataRate(DataRate(uint64_t(rateBps)));
    sw->AddPort(port);
    sw->SetupBuffers(kDefaultMtuBytes + kDefaultHeaderBytes);
    sw->AssignStreams(0);
    int64_t marked = 0;
    for (int64_t i = 0; i < trials; ++i)
    {
        marked += sw->DecideMark(0, uint64_t(queueBytes)) ? 1 : 0;
    }
    sw->Dispose();
    return double(marked) / double(trials);
}

void
ModelProbes::DcqcnAfterCnp(double lineRateBps,
                           double rateBps,
                           double alpha,
                           int64_t steps,
                           int64_t bytesPerStep,
                           double* rateOut,
                           double* targetOut,
                           double* alphaOut)
{
    EnsurePicosecondResolution();
    Ptr<DcqcnRateControl> rp = CreateObject<DcqcnRateControl>();
    DcqcnState s = rp->Initial(lineRateBps);
    s.rateBps = rateBps;
    s.targetBps = rateBps;
    s.alpha = alpha;
    rp->OnCnp(s);
    rateOut[0] = s.rateBps;
    targetOut[0] = s.targetBps;
    alphaOut[0] = s.alpha;
    for (int64_t k = 1; k <= steps; ++k)
    {
        if (bytesPerStep > 0)
        {
            rp->OnBytesSent(s, uint64_t(bytesPerStep), lineRateBps);
        }
        rp->OnIncreaseTimer(s, lineRateBps);
        rp->OnAlphaTimer(s);
        rateOut[k] = s.rateBps;
        targetOut[k] = s.targetBps;
        alphaOut[k] = s.alpha;
    }
}

} // namespace cosim
