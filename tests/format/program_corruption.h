// Building deliberately broken program files for the reader's tests.
//
// corrupt() starts from a valid fixture written by the real writer, unpacks what the reader
// accepted (so constant offsets are filled), lets the test break the object tree, and packs
// it again without the writer's checks, keeping the original data segment.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "format/program_file.h"
#include "support/program_fixtures.h"

namespace planrt::format {

using Mutation = std::function<void(fb::ProgramT&)>;

// Header + FlatBuffer (+ the segment at the next 4096 boundary when non-empty), exactly as
// given: no version stamping, no constant layout.
std::vector<uint8_t> assemble_file(const fb::ProgramT& program, const std::vector<uint8_t>& segment);

// The fixture's file after `mutate`; an empty vector when the fixture itself fails to load.
std::vector<uint8_t> corrupt(const fixtures::FixtureProgram& fixture, const Mutation& mutate);

// Loads `bytes` and expects an InvalidProgram error whose message contains every part.
void expect_invalid(std::vector<uint8_t> bytes, std::initializer_list<std::string> parts,
                    const ReadLimits& limits = {});

FileHeader read_header(const std::vector<uint8_t>& bytes);
void write_header(std::vector<uint8_t>& bytes, const FileHeader& header);

}  // namespace planrt::format
