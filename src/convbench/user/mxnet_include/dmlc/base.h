// convbench stand-in for dmlc-core's dmlc/base.h: the switches MXNet-era code may test (C++11 on), and logging.

#ifndef DMLC_BASE_H_
#define DMLC_BASE_H_

#define DMLC_USE_CXX11 1
#define DMLC_LOG_FATAL_THROW 1

#include <dmlc/logging.h>

#endif // DMLC_BASE_H_
