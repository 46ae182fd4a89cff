// convbench stand-in for dmlc-core's dmlc/logging.h, as MXNet 0.11-1.x built it for the ECE408 project (2017-2019):
// LOG(severity) << ... and the CHECK family. Mirrors dmlc's behaviour with DMLC_LOG_FATAL_THROW=1 (MXNet's
// default): LOG(FATAL) and a failed CHECK throw dmlc::Error carrying "file:line: message" (convbench's shim catches
// it and reports one line). LOG(INFO / WARNING / ERROR) write "file:line: message" to stderr. Only what the course's
// new-forward.cuh files use is here.

#ifndef DMLC_LOGGING_H_
#define DMLC_LOGGING_H_

#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>

namespace dmlc
{

struct Error : public std::runtime_error {
    explicit Error(const std::string &s) : std::runtime_error(s) {}
};

class LogMessage
{
public:
    LogMessage(const char *file, int line) { stream_ << file << ":" << line << ": "; }
    ~LogMessage()
    {
        stream_ << '\n';
        std::cerr << stream_.str() << std::flush;
    }
    std::ostream &stream() { return stream_; }

private:
    std::ostringstream stream_;
};

class LogMessageFatal
{
public:
    LogMessageFatal(const char *file, int line) { stream_ << file << ":" << line << ": "; }
    ~LogMessageFatal() noexcept(false) { throw Error(stream_.str()); }
    std::ostream &stream() { return stream_; }

private:
    std::ostringstream stream_;
};

// `cond ? (void)0 : LogMessageVoidify() & LOG(...)`: a statement that streams only when it logs.
class LogMessageVoidify
{
public:
    void operator&(std::ostream &) {}
};

template <typename X, typename Y>
inline std::unique_ptr<std::string> LogCheckFormat(const X &x, const Y &y)
{
    std::ostringstream os;
    os << " (" << x << " vs. " << y << ") ";
    return std::unique_ptr<std::string>(new std::string(os.str()));
}

#define DMLC_DEFINE_CHECK_FUNC(name, op)                                                                            \
    template <typename X, typename Y>                                                                               \
    inline std::unique_ptr<std::string> LogCheck##name(const X &x, const Y &y)                                      \
    {                                                                                                               \
        if (x op y)                                                                                                 \
            return nullptr;                                                                                         \
        return LogCheckFormat(x, y);                                                                                \
    }
DMLC_DEFINE_CHECK_FUNC(_LT, <)
DMLC_DEFINE_CHECK_FUNC(_GT, >)
DMLC_DEFINE_CHECK_FUNC(_LE, <=)
DMLC_DEFINE_CHECK_FUNC(_GE, >=)
DMLC_DEFINE_CHECK_FUNC(_EQ, ==)
DMLC_DEFINE_CHECK_FUNC(_NE, !=)
#undef DMLC_DEFINE_CHECK_FUNC

} // namespace dmlc

#define LOG_INFO dmlc::LogMessage(__FILE__, __LINE__)
#define LOG_WARNING LOG_INFO
#define LOG_ERROR LOG_INFO
#define LOG_FATAL dmlc::LogMessageFatal(__FILE__, __LINE__)
#define LOG_QFATAL LOG_FATAL
#define LOG(severity) LOG_##severity.stream()
#define LG LOG_INFO.stream()
#define LOG_IF(severity, condition) !(condition) ? (void)0 : dmlc::LogMessageVoidify() & LOG(severity)

#define CHECK(x)                                                                                                    \
    if (!(x))                                                                                                       \
    dmlc::LogMessageFatal(__FILE__, __LINE__).stream() << "Check failed: " #x << ": "
#define CHECK_BINARY_OP(name, op, x, y)                                                                             \
    if (auto __dmlc__log__err = dmlc::LogCheck##name(x, y))                                                         \
    dmlc::LogMessageFatal(__FILE__, __LINE__).stream() << "Check failed: " << #x " " #op " " #y << *__dmlc__log__err \
                                                       << ": "
#define CHECK_LT(x, y) CHECK_BINARY_OP(_LT, <, x, y)
#define CHECK_GT(x, y) CHECK_BINARY_OP(_GT, >, x, y)
#define CHECK_LE(x, y) CHECK_BINARY_OP(_LE, <=, x, y)
#define CHECK_GE(x, y) CHECK_BINARY_OP(_GE, >=, x, y)
#define CHECK_EQ(x, y) CHECK_BINARY_OP(_EQ, ==, x, y)
#define CHECK_NE(x, y) CHECK_BINARY_OP(_NE, !=, x, y)
#define CHECK_NOTNULL(x)                                                                                            \
    ((x) == NULL ? (dmlc::LogMessageFatal(__FILE__, __LINE__).stream() << "Check  notnull: " #x << ' ', (x)) : (x))
#define DCHECK(x) CHECK(x)
#define DCHECK_LT(x, y) CHECK_LT(x, y)
#define DCHECK_GT(x, y) CHECK_GT(x, y)
#define DCHECK_LE(x, y) CHECK_LE(x, y)
#define DCHECK_GE(x, y) CHECK_GE(x, y)
#define DCHECK_EQ(x, y) CHECK_EQ(x, y)
#define DCHECK_NE(x, y) CHECK_NE(x, y)

#endif // DMLC_LOGGING_H_
