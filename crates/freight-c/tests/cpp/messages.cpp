// The generated C++ messages against freight's Rust types (tests/messages.rs):
// each <dir>/<package>__<Type>.cdr that Rust wrote is decoded and written
// again to <file>.cpp, byte for byte the same if the two agree; then messages
// built here are written for Rust to decode. Every built-in header compiles
// in this one program (-Wall -Wextra -Werror).
#include <freight/msgs/builtin_interfaces.hpp>
#include <freight/msgs/geometry_msgs.hpp>
#include <freight/msgs/sensor_msgs.hpp>
#include <freight/msgs/std_msgs.hpp>
#include <freight/msgs/std_srvs.hpp>
#include <freight/msgs/tensor_msgs.hpp>

#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

namespace m = freight::msgs;

static std::vector<std::uint8_t> read_file(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<std::uint8_t>(std::istreambuf_iterator<char>(in), {});
}

static void write_file(const std::string &path, const std::vector<std::uint8_t> &bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char *>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

template <typename M>
static std::vector<std::uint8_t> again(const std::vector<std::uint8_t> &bytes) {
  return freight::cdr::to_cdr(freight::cdr::from_cdr<M>(bytes.data(), bytes.size()));
}

int main(int argc, char **argv) {
  if (argc != 2) {
    std::cerr << "usage: messages DIR\n";
    return 2;
  }
  const std::string dir = argv[1];
  const std::map<std::string, std::function<std::vector<std::uint8_t>(const std::vector<std::uint8_t> &)>> types = {
      {"sensor_msgs__Image", again<m::sensor_msgs::Image>},
      {"sensor_msgs__CameraInfo", again<m::sensor_msgs::CameraInfo>},
      {"sensor_msgs__PointCloud2", again<m::sensor_msgs::PointCloud2>},
      {"sensor_msgs__JointState", again<m::sensor_msgs::JointState>},
      {"sensor_msgs__LaserScan", again<m::sensor_msgs::LaserScan>},
      {"sensor_msgs__NavSatFix", again<m::sensor_msgs::NavSatFix>},
      {"std_msgs__Float32MultiArray", again<m::std_msgs::Float32MultiArray>},
      {"std_srvs__Trigger_Response", again<m::std_srvs::Trigger_Response>},
      {"std_srvs__Empty_Request", again<m::std_srvs::Empty_Request>},
  };
  for (const auto &[name, round_trip] : types) {
    const std::string path = dir + "/" + name + ".cdr";
    write_file(path + ".cpp", round_trip(read_file(path)));
    std::cout << "round trip " << name << "\n";
  }

  // Built here: the issue's own example, and a cloud with every kind of field.
  m::std_msgs::UInt8MultiArray bytes;
  bytes.data = std::vector<std::uint8_t>(1000, 7);
  bytes.layout.dim.push_back({"bytes", 1000, 1});
  write_file(dir + "/cpp__std_msgs__UInt8MultiArray.cdr", freight::cdr::to_cdr(bytes));

  m::sensor_msgs::PointCloud2 cloud;
  cloud.header.stamp.sec = -5;
  cloud.header.stamp.nanosec = 999999999u;
  cloud.header.frame_id = "lidar";
  cloud.height = 1;
  cloud.width = 3;
  cloud.fields = {{"x", 0, m::sensor_msgs::PointField::FLOAT32, 1}, {"intensity", 4, m::sensor_msgs::PointField::UINT8, 1}};
  cloud.point_step = 5;
  cloud.row_step = 15;
  cloud.data = std::vector<std::uint8_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  cloud.is_dense = true;
  write_file(dir + "/cpp__sensor_msgs__PointCloud2.cdr", freight::cdr::to_cdr(cloud));

  // Malformed input is an exception, never a crash or a wrong message.
  std::vector<std::uint8_t> truncated = freight::cdr::to_cdr(cloud);
  truncated.resize(truncated.size() - 9);
  try {
    freight::cdr::from_cdr<m::sensor_msgs::PointCloud2>(truncated.data(), truncated.size());
    std::cerr << "a truncated cloud decoded\n";
    return 1;
  } catch (const freight::cdr::DecodeError &e) {
    std::cout << "truncated: " << e.what() << "\n";
  }
  std::vector<std::uint8_t> hostile = freight::cdr::to_cdr(m::sensor_msgs::JointState{});
  hostile[4 + 8] = 0xff;  // the frame_id's length: far beyond the input
  try {
    freight::cdr::from_cdr<m::sensor_msgs::JointState>(hostile.data(), hostile.size());
    std::cerr << "a hostile length decoded\n";
    return 1;
  } catch (const freight::cdr::DecodeError &e) {
    std::cout << "hostile: " << e.what() << "\n";
  }
  std::cout << "constants " << static_cast<int>(m::sensor_msgs::PointField::FLOAT32) << " "
            << m::sensor_msgs::Image::TYPE_NAME << " " << m::std_srvs::SetBool::TYPE_NAME << "\n";
  return 0;
}
