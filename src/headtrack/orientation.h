// Orientation pipeline: rotation vector -> quaternion -> recenter -> filter -> axis mapping ->
// yaw/pitch/roll (docs/headtracker.md, "Meaning and math").
//
// Pure code: time is passed in as dt (taken from report timestamps), nothing reads a clock,
// allocates or throws. A PosePipeline belongs to one thread (in syncd: the loop thread, which is
// also where recenter requests come from); it is not thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

#include "headtrack/report_decoder.h"

namespace syncd::headtrack {

struct Quat {
  double w = 1, x = 0, y = 0, z = 0;
};

Quat multiply(const Quat& a, const Quat& b);
Quat conjugate(const Quat& q);
Quat normalized(const Quat& q);  // identity when q is zero or not finite
// Shortest-path spherical interpolation from a (t = 0) to b (t = 1).
Quat slerp(const Quat& a, const Quat& b, double t);
// theta = |r|; q = (cos(theta/2), r/theta * sin(theta/2)); identity when theta is tiny.
Quat quat_from_rotation_vector(const double r[3]);
// Inverse of the above, angle in [0, pi].
void rotation_vector_from_quat(const Quat& q, double r[3]);
// Rotates v by q (q * v * conj(q)).
void rotate(const Quat& q, const double v[3], double out[3]);

// Head-frame Euler angles in radians with R = Rz(yaw) * Rx(pitch) * Ry(roll):
// pitch = asin(R32), yaw = atan2(-R12, R22), roll = atan2(-R31, R33).
struct HeadEuler {
  double yaw = 0, pitch = 0, roll = 0;
};
HeadEuler head_euler(const Quat& q);
Quat quat_from_head_euler(const HeadEuler& e);

// Which head-frame rotation feeds each output angle, and its sign. Output angle i (0 yaw,
// 1 pitch, 2 roll) = sign[i] * rotation about head axis source[i] (0 X, 1 Y, 2 Z), where the
// rotation about Z is HeadEuler::yaw, about X pitch, about Y roll.
// Default (upstream, tested on an XM5 in OpenTrack): yaw = -rot(Z), pitch = +rot(X),
// roll = -rot(Y), i.e. --axis-map ZXY --invert ZY.
struct AxisMap {
  uint8_t source[3] = {2, 0, 1};
  double sign[3] = {-1, 1, -1};
};
// "ZXY" style permutation of X, Y, Z (case-insensitive) naming the source of yaw, pitch, roll.
// Keeps the signs of the axes. False on anything else.
bool parse_axis_order(std::string_view text, AxisMap& map);
// Letters of the head axes to negate ("ZY", "x", "none" or ""): a complete override of the signs.
bool parse_invert(std::string_view text, AxisMap& map);

// Defaults come from bench/headtrack_filter_bench.cpp --sweep (table in docs/headtracker.md): with
// a silent gyro they reach 90% of a 30 degree step within 80 ms and keep the yaw jitter at rest
// below upstream's, at 25, 50 and 100 Hz and 0.1 to 1 degree of sensor noise.
struct FilterConfig {
  // 0 = no smoothing (samples pass straight through). Otherwise the time constant at rest is
  // smoothing * kMaxRestTimeConstantS: larger is steadier at rest but lags more on slow turns.
  double smoothing = 0.3;
  // How fast the cutoff rises with angular speed (past the knee), the One Euro filter's beta: a
  // turn raises the cutoff so the output keeps up, stillness lowers it so noise is smoothed away.
  double speed_gain_hz_per_rad_s = 16;
  // Cutoff of the low-pass on the angular velocity estimated from successive orientations. Lower
  // is steadier at rest (noise raises the estimate less), but the estimate then rises more slowly
  // when a turn starts and lingers longer after it ends.
  double speed_cutoff_hz = 0.4;
  // Speeds well below the knee barely open the filter, speeds well above it count almost in full:
  // the cutoff follows speed^2 / (speed + knee). The estimate from orientations never reads zero
  // at rest (noise gives it a floor near 10 * speed_cutoff_hz * noise in radians, 0.07 rad/s for
  // 1 degree), and a linear law would let that floor shake the output; a 30 degree step reads
  // several rad/s. The same law applies to a reporting gyro, whose bias it also ignores.
  double speed_knee_rad_s = 1.0;
  // Extrapolate the output this far ahead along the angular velocity (Android does this).
  double predict_ms = 0;
  // Gaps longer than this reset the filter instead of slerping across them.
  double max_gap_s = 0.5;
  static constexpr double kMaxRestTimeConstantS = 2.0;
};

// Adaptive low-pass on orientations after the One Euro filter (Casiez et al., CHI 2012): each
// sample slerps the state towards the measurement by alpha = 1 - exp(-2 pi fc dt), with the cutoff
// fc = 1 / (2 pi smoothing kMaxRestTimeConstantS) + speed_gain_hz_per_rad_s * v^2 / (v + knee).
// The speed v is the gyro's when it reports; when it is silent (one XM5 firmware reports all
// zeros) it is the length of the angular velocity from successive orientations, low-passed at
// speed_cutoff_hz because differentiating amplifies sensor noise.
//
// Pure: dt comes from report timestamps; no clock, allocation, lock or exception. One instance
// belongs to one thread (whichever calls update(); in syncd the loop thread); not thread-safe.
class OrientationFilter {
 public:
  // Any thread, before the instance is shared with its owning thread.
  explicit OrientationFilter(FilterConfig config = {}) : config_(config) {}
  // Owning thread. The next update() starts afresh from its measurement.
  void reset() { initialized_ = false; }
  // Owning thread. measured: the recentered orientation; gyro: rad/s head frame or nullptr;
  // dt_s: seconds since the previous sample (a non-positive, non-finite or over max_gap_s dt
  // resets). Returns the filtered (and, if configured, predicted) orientation.
  Quat update(const Quat& measured, const double* gyro, double dt_s);
  // Owning thread. Angular speed (rad/s) that set the last update's cutoff.
  double angular_speed() const { return speed_; }
  // Owning thread. True when the last update's gyro was absent or all zero.
  bool gyro_silent() const { return gyro_silent_; }
  // Owning thread. Cutoff (Hz) of the last update; infinite when smoothing is 0.
  double cutoff_hz() const { return cutoff_hz_; }
  const FilterConfig& config() const { return config_; }  // any thread: immutable

 private:
  FilterConfig config_;
  bool initialized_ = false;
  Quat state_;
  Quat previous_;
  double velocity_[3] = {};  // low-passed angular velocity from orientations, rad/s head frame
  double speed_ = 0;
  double cutoff_hz_ = 0;
  bool gyro_silent_ = false;
};

struct PipelineConfig {
  FilterConfig filter;
  AxisMap axes;
  bool recenter_on_start = true;  // the device's reference frame is arbitrary at connect time
};

struct Pose {
  Quat raw;                      // from the rotation vector, before recentering
  Quat orientation;              // recentered, filtered, predicted
  double ypr_deg[3] = {};        // mapped output: yaw, pitch, roll in (-180, 180]
  double angular_speed = 0;      // rad/s estimate the filter used
  uint64_t discontinuities = 0;  // counter changes seen (each one recentered)
  uint32_t counter = 0;          // last raw discontinuity counter
  bool recentered = false;       // this sample triggered a recenter
};

class PosePipeline {
 public:
  explicit PosePipeline(PipelineConfig config = {});
  // The next sample becomes the new center.
  void request_recenter() { recenter_pending_ = true; }
  // Forget everything (new device): the next sample starts afresh.
  void reset();
  // dt_s: seconds since the previous sample, from report timestamps. Never fails; the pose is
  // always finite (non-finite input yields the previous pose, or identity).
  const Pose& process(const TrackerSample& sample, double dt_s);
  const Pose& pose() const { return pose_; }
  const PipelineConfig& config() const { return config_; }

 private:
  PipelineConfig config_;
  OrientationFilter filter_;
  Quat center_;
  bool started_ = false;
  bool recenter_pending_ = false;
  bool have_counter_ = false;
  uint32_t last_counter_ = 0;
  Pose pose_;
};

// Maps head-frame angles to the output yaw/pitch/roll in degrees, wrapped to (-180, 180].
void map_axes(const AxisMap& map, const HeadEuler& e, double ypr_deg[3]);
double wrap_degrees(double deg);

}  // namespace syncd::headtrack
