#!/usr/bin/env bash
# The installed package, as a user outside this tree sees it (ctest install.package):
#   1. cmake --install BUILD into a temporary prefix;
#   2. every installed header compiles on its own against that prefix alone (a public header
#      that includes a private one, or one left uninstalled, fails here);
#   3. examples/cpp configures with find_package(planrt), builds and runs on a program the
#      installed CLI builds; a pkg-config build of the same source links and runs too;
#   4. examples/python runs against the installed module, from another folder.
#   tests/install/install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" > "$work/install.log"
test -f "$prefix/lib/cmake/planrt/planrtConfig.cmake"
test -f "$prefix/lib/cmake/planrt/planrtConfigVersion.cmake"
test -f "$prefix/lib/pkgconfig/planrt.pc"
test -x "$prefix/bin/planrt"
if find "$prefix/include" -name '*.h' -path '*src*' | grep -q .; then
  echo "private headers were installed" >&2; exit 1
fi

# 2. Each header alone, with only the prefix (and system headers) on the include path.
cuda_flag=()
if grep -q 'planrt_HAS_CUDA ON' "$prefix/lib/cmake/planrt/planrtConfig.cmake"; then
  cuda_flag=(-DPLANRT_HAVE_CUDA=1)
fi
headers=$(cd "$prefix/include" && find planrt -name '*.h' | sort)
count=0
for h in $headers; do
  printf '#include <%s>\nint main() { return 0; }\n' "$h" > "$work/h.cpp"
  if ! c++ -std=c++20 -fsyntax-only -nostdinc++ -isystem /usr/include/c++/$(c++ -dumpversion) \
       -isystem /usr/include/x86_64-linux-gnu/c++/$(c++ -dumpversion) -I"$prefix/include" \
       "${cuda_flag[@]}" "$work/h.cpp" 2> "$work/h.err"; then
    echo "installed header $h does not compile on its own:" >&2
    cat "$work/h.err" >&2
    exit 1
  fi
  count=$((count + 1))
done
echo "install: $count installed headers compile on their own"

# 3. The C++ example through find_package, then through pkg-config.
"$prefix/bin/planrt" build "$src/tests/data/models/mlp.json" -o "$work/mlp.prog" > /dev/null
cmake -S "$src/examples/cpp" -B "$work/example" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release > "$work/example.log"
cmake --build "$work/example" > "$work/example-build.log"
LD_LIBRARY_PATH="$prefix/lib" "$work/example/run_program" "$work/mlp.prog" > "$work/run.txt"
grep -q '^estimate forward on cpu' "$work/run.txt"
grep -q '^output y: f32 \[1, 4\]' "$work/run.txt"
grep -q '^memory on cpu' "$work/run.txt"
# The example does not rely on an RPATH the build put in: it ran with LD_LIBRARY_PATH.
flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs planrt)
# shellcheck disable=SC2086
c++ -std=c++20 "$src/examples/cpp/run_program.cpp" $flags -o "$work/run_program_pc"
LD_LIBRARY_PATH="$prefix/lib" "$work/run_program_pc" "$work/mlp.prog" | cmp - "$work/run.txt"
echo "install: examples/cpp built with find_package and with pkg-config, both ran"

# 4. The Python example against the installed module, from a folder outside the tree.
site=$(find "$prefix/lib" -maxdepth 3 -type d -name dist-packages | head -1)
test -f "$site/planrt/__init__.py"
(cd "$work" && PYTHONPATH="$site" OPENBLAS_NUM_THREADS=1 /usr/bin/python3 -c \
  "import planrt, os; assert os.path.dirname(planrt.__file__) == '$site/planrt', planrt.__file__")
(cd "$work" && PYTHONPATH="$site" OPENBLAS_NUM_THREADS=1 /usr/bin/python3 \
  "$src/examples/python/compare_with_torch.py" > "$work/python.txt")
tail -1 "$work/python.txt" | grep -qx OK
echo "install: examples/python ran against the installed module"
echo "1 passed, 0 failed"
