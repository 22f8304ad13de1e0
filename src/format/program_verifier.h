// Deep verification of a program's methods: every index and range the runtime will use.
//
// Runs after flatbuffers::Verifier has accepted the buffer (so every table, vector and
// string is in bounds) and checks what the schema cannot: value ids, buffer ids,
// offset + max-shape size within each planned buffer, dims, dtype/kind enums, rank
// limits, instruction operands and their placement, segments and their nested Graph
// blobs (verified as FlatBuffers here, then checked against the graph's own values and
// scratch size). The constants' bytes are checked by the reader (program_file.cpp), which
// knows where they live. Errors are InvalidProgram and name the method, the instruction or
// value (id and name), the buffer, the offsets and sizes involved. Stateless, thread-safe.
#pragma once

#include "format/program_file.h"
#include "planrt/core/status.h"

namespace planrt::format {

// Options for every flatbuffers::Verifier run on untrusted bytes: the schema nests about
// eight levels deep, and a table cap bounds verification time on crafted input.
flatbuffers::Verifier::Options verifier_options();

Status verify_methods(const fb::Program& program, const ReadLimits& limits);

// The size limits alone (each planned buffer, each segment graph's scratch), on a program
// about to be written: the builder checks what it writes against the limits a default load
// applies, with the messages the load would give, so that no program `planrt build` writes
// is refused for its size by `planrt run`.
Status verify_sizes(const fb::ProgramT& program, const ReadLimits& limits);

}  // namespace planrt::format
