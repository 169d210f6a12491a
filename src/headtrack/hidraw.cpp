#include "headtrack/hidraw.h"

#include <dirent.h>
#include <fcntl.h>
#include <libudev.h>
#include <linux/hidraw.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace syncd::headtrack {

const char* const kUdevRuleHint =
    "KERNEL==\"hidraw*\", KERNELS==\"0005:054C:*\", TAG+=\"uaccess\"  "
    "(in /etc/udev/rules.d/70-headtracker.rules; see docs/headtracker.md)";

namespace {

bool read_file(const std::string& path, std::string& out, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (error) *error = path + ": " + std::strerror(errno);
    return false;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

int hidraw_number(const std::string& name) {
  return name.size() > 6 ? std::atoi(name.c_str() + 6) : -1;
}

void fill_from_sysfs(const std::string& sysdir, HidrawNode& node) {
  std::string text;
  if (read_file(sysdir + "/device/report_descriptor", text, &node.descriptor_error)) {
    node.descriptor.assign(text.begin(), text.end());
  }
  if (read_file(sysdir + "/device/uevent", text, nullptr)) {
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.rfind("HID_NAME=", 0) == 0)
        node.hid_name = line.substr(9);
      else if (line.rfind("HID_ID=", 0) == 0)
        node.hid_id = line.substr(7);
      else if (line.rfind("HID_UNIQ=", 0) == 0)
        node.hid_uniq = line.substr(9);
    }
  }
}

std::vector<HidrawNode> enumerate_udev(const EnumerateOptions& options) {
  std::vector<HidrawNode> nodes;
  udev* u = udev_new();
  if (!u) return nodes;
  udev_enumerate* e = udev_enumerate_new(u);
  udev_enumerate_add_match_subsystem(e, "hidraw");
  udev_enumerate_scan_devices(e);
  udev_list_entry* entry;
  udev_list_entry_foreach(entry, udev_enumerate_get_list_entry(e)) {
    const char* syspath = udev_list_entry_get_name(entry);
    udev_device* d = udev_device_new_from_syspath(u, syspath);
    if (!d) continue;
    HidrawNode node;
    node.name = udev_device_get_sysname(d);
    const char* devnode = udev_device_get_devnode(d);
    node.devnode = devnode ? devnode : options.dev_root + "/" + node.name;
    fill_from_sysfs(syspath, node);
    nodes.push_back(std::move(node));
    udev_device_unref(d);
  }
  udev_enumerate_unref(e);
  udev_unref(u);
  return nodes;
}

std::vector<HidrawNode> enumerate_directory(const EnumerateOptions& options) {
  std::vector<HidrawNode> nodes;
  DIR* dir = opendir(options.sysfs_root.c_str());
  if (!dir) return nodes;
  while (dirent* d = readdir(dir)) {
    const std::string name = d->d_name;
    if (name.rfind("hidraw", 0) != 0) continue;
    HidrawNode node;
    node.name = name;
    node.devnode = options.dev_root + "/" + name;
    fill_from_sysfs(options.sysfs_root + "/" + name, node);
    nodes.push_back(std::move(node));
  }
  closedir(dir);
  return nodes;
}

}  // namespace

std::vector<HidrawNode> enumerate_hidraw(const EnumerateOptions& options) {
  std::vector<HidrawNode> nodes = options.sysfs_root == "/sys/class/hidraw"
                                      ? enumerate_udev(options)
                                      : enumerate_directory(options);
  std::sort(nodes.begin(), nodes.end(), [](const HidrawNode& a, const HidrawNode& b) {
    return hidraw_number(a.name) < hidraw_number(b.name);
  });
  return nodes;
}

const char* to_string(NodeAccess access) {
  switch (access) {
    case NodeAccess::kOk:
      return "ok";
    case NodeAccess::kDenied:
      return "access denied";
    case NodeAccess::kMissing:
      return "device node missing";
    case NodeAccess::kError:
      return "open failed";
    case NodeAccess::kNotTried:
      return "not opened";
  }
  return "unknown";
}

ProbeEntry probe_node(const HidrawNode& node) {
  ProbeEntry p;
  p.node = node;
  if (node.descriptor.empty()) {
    p.reason = "no report descriptor (" + node.descriptor_error + ")";
    return p;
  }
  ParsedDescriptor parsed;
  const ParseResult pr = parse_hid_descriptor(node.descriptor, parsed);
  if (!pr.ok()) {
    p.reason = std::string("descriptor does not parse: ") + to_string(pr.error) + " at byte " +
               std::to_string(pr.error_offset);
    return p;
  }
  const char* why = nullptr;
  if (!recognize_head_tracker(parsed, p.layout, &why)) {
    p.reason = why;
    return p;
  }
  p.version = p.layout.version_hint();

  HidrawDevice dev;
  if (!dev.open(node.devnode, false)) {
    p.access_errno = errno;
    p.access = errno == EACCES || errno == EPERM ? NodeAccess::kDenied
               : errno == ENOENT                 ? NodeAccess::kMissing
                                                 : NodeAccess::kError;
    p.is_tracker = true;  // by descriptor; the description could not be checked
    p.reason = std::string("head tracker by descriptor, but ") + to_string(p.access) + " on " +
               node.devnode + " (" + std::strerror(p.access_errno) + ")";
    return p;
  }
  p.access = NodeAccess::kOk;
  if (!p.layout.description.present) {
    p.is_tracker = true;
    p.reason = "head tracker by descriptor (no Sensor Description property)";
    return p;
  }
  std::vector<uint8_t> report(
      std::max<size_t>(p.layout.feature_report_bytes[p.layout.description.report_id], 2));
  report[0] = p.layout.description.report_id;
  const int n = dev.get_feature(report);
  if (n <= 0) {
    p.is_tracker = true;
    p.reason = std::string("head tracker by descriptor; reading the description failed: ") +
               std::strerror(errno);
    return p;
  }
  report.resize(size_t(n));
  const auto text = description_bytes(p.layout, report);
  if (!parse_sensor_description(text, p.description)) {
    p.reason = "custom sensor, but its description is not #AndroidHeadTracker#1./2.: \"" +
               std::string(text.begin(), text.end()) + "\"";
    return p;
  }
  p.description_read = true;
  p.version = p.description.major;
  p.is_tracker = true;
  p.reason = "Android head tracker v" + std::to_string(p.description.major) + "." +
             std::to_string(p.description.minor);
  return p;
}

std::vector<ProbeEntry> probe_all(const EnumerateOptions& options) {
  std::vector<ProbeEntry> out;
  for (const HidrawNode& node : enumerate_hidraw(options)) out.push_back(probe_node(node));
  return out;
}

HidrawDevice::~HidrawDevice() {
  close();
}

bool HidrawDevice::open(const std::string& devnode, bool read_write) {
  close();
  fd_ = ::open(devnode.c_str(), (read_write ? O_RDWR : O_RDONLY) | O_CLOEXEC);
  return fd_ >= 0;
}

void HidrawDevice::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool HidrawDevice::read_descriptor(std::vector<uint8_t>& out) {
  int size = 0;
  if (ioctl(fd_, HIDIOCGRDESCSIZE, &size) < 0) return false;
  hidraw_report_descriptor desc{};
  desc.size = uint32_t(std::clamp(size, 0, HID_MAX_DESCRIPTOR_SIZE));
  if (ioctl(fd_, HIDIOCGRDESC, &desc) < 0) return false;
  out.assign(desc.value, desc.value + desc.size);
  return true;
}

bool HidrawDevice::raw_info(uint32_t* bustype, uint16_t* vendor, uint16_t* product) {
  hidraw_devinfo info{};
  if (ioctl(fd_, HIDIOCGRAWINFO, &info) < 0) return false;
  *bustype = info.bustype;
  *vendor = uint16_t(info.vendor);  // __s16 in the kernel header
  *product = uint16_t(info.product);
  return true;
}

int HidrawDevice::get_feature(std::span<uint8_t> report) {
  return ioctl(fd_, HIDIOCGFEATURE(report.size()), report.data());
}

bool HidrawDevice::set_feature(std::span<const uint8_t> report) {
  return ioctl(fd_, HIDIOCSFEATURE(report.size()), report.data()) >= 0;
}

ssize_t HidrawDevice::read_report(std::span<uint8_t> buffer) {
  return ::read(fd_, buffer.data(), buffer.size());
}

}  // namespace syncd::headtrack
