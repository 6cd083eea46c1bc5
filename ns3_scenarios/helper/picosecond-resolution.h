/**
 * @file
 * @ingroup cosim
 * cosim keeps every time in integer picoseconds: the simulator's resolution is set to ps once per process.
 */
#ifndef COSIM_PICOSECOND_RESOLUTION_H
#define COSIM_PICOSECOND_RESOLUTION_H

#include "ns3/nstime.h"

namespace ns3
{

/// Set the time resolution to ps, once per process, before any simulation or Time attribute is used.
inline void
EnsurePicosecondResolution()
{
    static bool done = false; // inline: one flag for every translation unit of the library
    if (!done)
    {
        Time::SetResolution(Time::PS);
        done = true;
    }
}

} // namespace ns3

#endif // COSIM_PICOSECOND_RESOLUTION_H
