// Linux hidraw devices: enumeration (libudev, or any directory shaped like /sys/class/hidraw),
// the read-only probe, and an open device with the ioctls the tracker needs.
//
// Control-path code: it does file and ioctl I/O and may allocate. Functions are thread-safe
// (they share no state); a HidrawDevice is used by one thread at a time (the HID reader thread).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "headtrack/head_tracker.h"

namespace syncd::headtrack {

struct EnumerateOptions {
  // Directory holding hidrawN entries, each with device/report_descriptor and device/uevent.
  // The default uses libudev; any other value scans that tree (tests point it at a fake one).
  std::string sysfs_root = "/sys/class/hidraw";
  // Where the device nodes live (devnode = dev_root + "/" + name).
  std::string dev_root = "/dev";
};

struct HidrawNode {
  std::string name;      // "hidraw3"
  std::string devnode;   // "/dev/hidraw3"
  std::string hid_name;  // uevent HID_NAME, e.g. "WH-1000XM5"
  std::string hid_id;    // uevent HID_ID, e.g. "0005:0000054C:00000DE1" (bus:vendor:product)
  std::string hid_uniq;  // uevent HID_UNIQ (Bluetooth: the headset's address)
  std::vector<uint8_t> descriptor;  // from sysfs: readable without device permission
  std::string descriptor_error;     // why the descriptor could not be read, if it could not
};

// Sorted by hidraw number. Never throws; unreadable entries carry descriptor_error.
std::vector<HidrawNode> enumerate_hidraw(const EnumerateOptions& options);

enum class NodeAccess : uint8_t { kOk, kDenied, kMissing, kError, kNotTried };
const char* to_string(NodeAccess access);

struct ProbeEntry {
  HidrawNode node;
  bool is_tracker = false;  // descriptor matches (and the description, when it could be read)
  std::string reason;       // one line: why accepted or not
  NodeAccess access = NodeAccess::kNotTried;
  int access_errno = 0;
  bool description_read = false;
  SensorDescription description;
  int version = 0;  // 1 or 2 (from the description, else from the descriptor), 0 unknown
  TrackerLayout layout;
};

// Read-only: parses the descriptor, and when it matches opens the node read-only to read the
// description feature report (HIDIOCGFEATURE is a read; probe never writes).
ProbeEntry probe_node(const HidrawNode& node);
std::vector<ProbeEntry> probe_all(const EnumerateOptions& options);

// An open hidraw node. Every call returns false / -1 with errno preserved on failure.
class HidrawDevice {
 public:
  HidrawDevice() = default;
  ~HidrawDevice();
  HidrawDevice(const HidrawDevice&) = delete;
  HidrawDevice& operator=(const HidrawDevice&) = delete;

  bool open(const std::string& devnode, bool read_write);
  void close();
  int fd() const { return fd_; }
  // HIDIOCGRDESCSIZE + HIDIOCGRDESC.
  bool read_descriptor(std::vector<uint8_t>& out);
  // HIDIOCGRAWINFO; vendor/product are signed 16-bit in the kernel struct, cast here.
  bool raw_info(uint32_t* bustype, uint16_t* vendor, uint16_t* product);
  // HIDIOCGFEATURE: report[0] must hold the report ID; returns bytes read or -1.
  int get_feature(std::span<uint8_t> report);
  // HIDIOCSFEATURE: report[0] is the report ID.
  bool set_feature(std::span<const uint8_t> report);
  // Blocking read of one input report; bytes read, 0 on EOF, -1 on error.
  ssize_t read_report(std::span<uint8_t> buffer);

 private:
  int fd_ = -1;
};

// The udev rule docs/headtracker.md recommends (also printed by probe on "access denied").
extern const char* const kUdevRuleHint;

}  // namespace syncd::headtrack
