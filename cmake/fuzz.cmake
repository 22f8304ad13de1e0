# PLANRT_FUZZ=ON: instruments everything built after this point (the libraries included)
# for libFuzzer, AddressSanitizer and UndefinedBehaviorSanitizer. Coverage has to reach the
# library code, not just the fuzz target, or libFuzzer cannot tell which inputs are new.
# fuzzer-no-link adds the coverage hooks without libFuzzer's main; only the fuzz targets
# link -fsanitize=fuzzer (tests/fuzz/CMakeLists.txt).
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "PLANRT_FUZZ=ON needs clang (libFuzzer), not ${CMAKE_CXX_COMPILER_ID}: "
                      "configure with -DCMAKE_CXX_COMPILER=clang++ (scripts/fuzz.sh does)")
endif()
# UBSan findings stop the run (and so become crashes libFuzzer saves) instead of scrolling by.
add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
                    -fno-omit-frame-pointer)
# At the sanitizers' -O1 clang cannot vectorise the kernels' `omp simd` loops and says so
# (-Wpass-failed); that is about speed, which a fuzz build does not have, not about the code.
add_compile_options(-Wno-pass-failed)
add_link_options(-fsanitize=address,undefined)
