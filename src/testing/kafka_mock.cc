#include "testing/kafka_mock.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>
#include <vector>

#include "testing/wait_for.h"

namespace gapless {
namespace {

using testing_util::NowMs;

}  // namespace

Result<std::unique_ptr<KafkaMockCluster>> KafkaMockCluster::Start(int brokers, std::string binary) {
#ifdef GAPLESS_KAFKA_MOCK_BIN
  if (binary.empty()) binary = GAPLESS_KAFKA_MOCK_BIN;
#endif
  if (binary.empty()) return FailedPrecondition("KafkaMockCluster: no gapless-kafka-mock path");
  // A write to a helper that died must fail the command, not kill the test.
  signal(SIGPIPE, SIG_IGN);
  int in_pipe[2];   // parent -> child stdin
  int out_pipe[2];  // child stdout -> parent
  if (pipe2(in_pipe, O_CLOEXEC) != 0) return Internal("KafkaMockCluster: pipe failed");
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    close(in_pipe[0]);
    close(in_pipe[1]);
    return Internal("KafkaMockCluster: pipe failed");
  }
  std::string count = std::to_string(brokers);
  pid_t pid = fork();
  if (pid < 0) return Internal("KafkaMockCluster: fork failed");
  if (pid == 0) {
    dup2(in_pipe[0], STDIN_FILENO);
    dup2(out_pipe[1], STDOUT_FILENO);
    std::vector<char*> argv = {binary.data(), count.data(), nullptr};
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  close(in_pipe[0]);
  close(out_pipe[1]);
  std::unique_ptr<KafkaMockCluster> cluster(new KafkaMockCluster());
  cluster->brokers_ = brokers;
  cluster->pid_ = pid;
  cluster->to_child_ = in_pipe[1];
  cluster->from_child_ = out_pipe[0];
  auto line = cluster->ReadLine(10'000);
  if (!line.ok()) {
    return line.status().WithContext("KafkaMockCluster: " + binary + " did not start");
  }
  if (line->empty()) return Internal("KafkaMockCluster: empty bootstrap line");
  cluster->bootstrap_ = *line;
  return cluster;
}

KafkaMockCluster::~KafkaMockCluster() { Stop(); }

void KafkaMockCluster::Stop() {
  if (to_child_ >= 0) close(to_child_);
  to_child_ = -1;
  if (pid_ > 0) {
    // Closing stdin asks the helper to exit; give it a moment to destroy the cluster cleanly.
    int status = 0;
    int64_t end = NowMs() + 2'000;
    bool reaped = false;
    while (NowMs() < end) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!reaped) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
    }
    pid_ = -1;
  }
  if (from_child_ >= 0) close(from_child_);
  from_child_ = -1;
}

Result<std::string> KafkaMockCluster::ReadLine(int64_t timeout_ms) {
  int64_t end = NowMs() + timeout_ms;
  while (true) {
    size_t nl = buffered_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffered_.substr(0, nl);
      buffered_.erase(0, nl + 1);
      return line;
    }
    int64_t left = end - NowMs();
    if (left <= 0) return Unavailable("no answer from gapless-kafka-mock");
    pollfd pfd{from_child_, POLLIN, 0};
    int rc = poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left, 1'000)));
    if (rc < 0 && errno != EINTR) return Internal("poll on gapless-kafka-mock failed");
    if (rc <= 0) continue;
    char buf[512];
    ssize_t n = read(from_child_, buf, sizeof(buf));
    if (n == 0) return Unavailable("gapless-kafka-mock exited");
    if (n < 0) {
      if (errno == EINTR) continue;
      return Internal("read from gapless-kafka-mock failed");
    }
    buffered_.append(buf, static_cast<size_t>(n));
  }
}

Status KafkaMockCluster::Command(const std::string& line) {
  if (to_child_ < 0) return FailedPrecondition("KafkaMockCluster: stopped");
  std::string out = line + "\n";
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = write(to_child_, out.data() + done, out.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Unavailable("KafkaMockCluster: write to gapless-kafka-mock failed");
    }
    done += static_cast<size_t>(n);
  }
  GAPLESS_ASSIGN_OR_RETURN(std::string answer, ReadLine(10'000));
  if (answer == "ok") return Status::Ok();
  return Internal("KafkaMockCluster: " + line + ": " + answer);
}

Status KafkaMockCluster::SetBrokerDown(int32_t broker_id) {
  return Command("down " + std::to_string(broker_id));
}

Status KafkaMockCluster::SetBrokerUp(int32_t broker_id) {
  return Command("up " + std::to_string(broker_id));
}

Status KafkaMockCluster::CreateTopic(const std::string& name, int partitions, int replication) {
  if (replication <= 0) replication = std::min(3, brokers_);
  return Command("create " + name + " " + std::to_string(partitions) + " " +
                 std::to_string(replication));
}

Status KafkaMockCluster::SetLeader(const std::string& topic, int32_t partition, int32_t broker_id) {
  return Command("leader " + topic + " " + std::to_string(partition) + " " +
                 std::to_string(broker_id));
}

Status KafkaMockCluster::PushRequestErrors(int api_key, const std::vector<int>& error_codes) {
  std::string line = "errors " + std::to_string(api_key);
  for (int code : error_codes) line += " " + std::to_string(code);
  return Command(line);
}

}  // namespace gapless
