//===- zrun.cpp - the zplan runtime driver --------------------------------===//
//
// Runs a plan written by zcc on the ranks mpirun launches, or prints what a
// plan holds. All of it lives in the tooling library
// (runtime/tooling/Cli.h); this main only hands over the command line.
//
//===----------------------------------------------------------------------===//

#include "runtime/tooling/Cli.h"

int main(int argc, char **argv) { return zplan::zrunMain(argc, argv); }
