#include "headtrack/orientation.h"

#include <algorithm>
#include <cmath>

namespace syncd::headtrack {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kRadToDeg = 180.0 / kPi;

bool finite(const Quat& q) {
  return std::isfinite(q.w) && std::isfinite(q.x) && std::isfinite(q.y) && std::isfinite(q.z);
}

double dot(const Quat& a, const Quat& b) {
  return a.w * b.w + a.x * b.x + a.y * b.y + a.z * b.z;
}

// Small-angle-safe exp of a rotation vector given as angular velocity * time.
Quat exp_rotation(double wx, double wy, double wz) {
  const double r[3] = {wx, wy, wz};
  return quat_from_rotation_vector(r);
}

}  // namespace

Quat multiply(const Quat& a, const Quat& b) {
  return {
      a.w * b.w - a.x * b.x - a.y * b.y - a.z * b.z, a.w * b.x + a.x * b.w + a.y * b.z - a.z * b.y,
      a.w * b.y - a.x * b.z + a.y * b.w + a.z * b.x, a.w * b.z + a.x * b.y - a.y * b.x + a.z * b.w};
}

Quat conjugate(const Quat& q) {
  return {q.w, -q.x, -q.y, -q.z};
}

Quat normalized(const Quat& q) {
  const double n = std::sqrt(dot(q, q));
  if (!(n > 1e-12) || !std::isfinite(n)) return {};
  return {q.w / n, q.x / n, q.y / n, q.z / n};
}

Quat slerp(const Quat& a, const Quat& b_in, double t) {
  Quat b = b_in;
  double d = dot(a, b);
  if (d < 0) {  // q and -q are the same rotation: take the short way
    b = {-b.w, -b.x, -b.y, -b.z};
    d = -d;
  }
  if (t <= 0) return a;
  if (t >= 1) return b;
  if (d > 0.9995) {  // nearly parallel: lerp is accurate and avoids dividing by sin(~0)
    return normalized({a.w + t * (b.w - a.w), a.x + t * (b.x - a.x), a.y + t * (b.y - a.y),
                       a.z + t * (b.z - a.z)});
  }
  const double theta = std::acos(std::clamp(d, -1.0, 1.0));
  const double s = std::sin(theta);
  const double wa = std::sin((1 - t) * theta) / s;
  const double wb = std::sin(t * theta) / s;
  return normalized(
      {wa * a.w + wb * b.w, wa * a.x + wb * b.x, wa * a.y + wb * b.y, wa * a.z + wb * b.z});
}

Quat quat_from_rotation_vector(const double r[3]) {
  const double theta = std::sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2]);
  if (!std::isfinite(theta)) return {};
  if (theta < 1e-9) return normalized({1, r[0] * 0.5, r[1] * 0.5, r[2] * 0.5});  // first order
  const double k = std::sin(theta * 0.5) / theta;
  return normalized({std::cos(theta * 0.5), r[0] * k, r[1] * k, r[2] * k});
}

void rotation_vector_from_quat(const Quat& q_in, double r[3]) {
  Quat q = normalized(q_in);
  if (q.w < 0) q = {-q.w, -q.x, -q.y, -q.z};
  const double s = std::sqrt(q.x * q.x + q.y * q.y + q.z * q.z);
  if (s < 1e-12) {
    r[0] = 2 * q.x;
    r[1] = 2 * q.y;
    r[2] = 2 * q.z;
    return;
  }
  const double angle = 2 * std::atan2(s, q.w);
  r[0] = q.x / s * angle;
  r[1] = q.y / s * angle;
  r[2] = q.z / s * angle;
}

void rotate(const Quat& q, const double v[3], double out[3]) {
  const Quat p{0, v[0], v[1], v[2]};
  const Quat t = multiply(multiply(q, p), conjugate(q));
  out[0] = t.x;
  out[1] = t.y;
  out[2] = t.z;
}

HeadEuler head_euler(const Quat& q_in) {
  const Quat q = normalized(q_in);
  const double w = q.w, x = q.x, y = q.y, z = q.z;
  // Rotation matrix entries (1-based names as in the spec).
  const double r12 = 2 * (x * y - w * z);
  const double r22 = 1 - 2 * (x * x + z * z);
  const double r31 = 2 * (x * z - w * y);
  const double r32 = 2 * (y * z + w * x);
  const double r33 = 1 - 2 * (x * x + y * y);
  HeadEuler e;
  e.pitch = std::asin(std::clamp(r32, -1.0, 1.0));
  e.yaw = std::atan2(-r12, r22);
  e.roll = std::atan2(-r31, r33);
  return e;
}

Quat quat_from_head_euler(const HeadEuler& e) {
  const Quat qz{std::cos(e.yaw / 2), 0, 0, std::sin(e.yaw / 2)};
  const Quat qx{std::cos(e.pitch / 2), std::sin(e.pitch / 2), 0, 0};
  const Quat qy{std::cos(e.roll / 2), 0, std::sin(e.roll / 2), 0};
  return multiply(multiply(qz, qx), qy);
}

bool parse_axis_order(std::string_view text, AxisMap& map) {
  if (text.size() != 3) return false;
  uint8_t source[3];
  bool seen[3] = {};
  for (int i = 0; i < 3; ++i) {
    const char c = char(text[size_t(i)] | 0x20);
    if (c < 'x' || c > 'z') return false;
    source[i] = uint8_t(c - 'x');
    if (seen[source[i]]) return false;
    seen[source[i]] = true;
  }
  // Signs belong to head axes, so carry them over to wherever each axis now goes.
  bool negated[3] = {};
  for (int i = 0; i < 3; ++i) negated[map.source[i]] = map.sign[i] < 0;
  for (int i = 0; i < 3; ++i) {
    map.source[i] = source[i];
    map.sign[i] = negated[source[i]] ? -1 : 1;
  }
  return true;
}

bool parse_invert(std::string_view text, AxisMap& map) {
  bool negated[3] = {};
  if (text != "none") {
    for (char c : text) {
      c = char(c | 0x20);
      if (c < 'x' || c > 'z') return false;
      negated[c - 'x'] = true;
    }
  }
  for (int i = 0; i < 3; ++i) map.sign[i] = negated[map.source[i]] ? -1 : 1;
  return true;
}

double wrap_degrees(double deg) {
  if (!std::isfinite(deg)) return 0;
  double w = std::fmod(deg, 360.0);
  if (w <= -180) w += 360;
  if (w > 180) w -= 360;
  return w;
}

void map_axes(const AxisMap& map, const HeadEuler& e, double ypr_deg[3]) {
  const double about[3] = {e.pitch, e.roll, e.yaw};  // rotation about X, Y, Z
  for (int i = 0; i < 3; ++i) {
    ypr_deg[i] = wrap_degrees(map.sign[i] * about[map.source[i] % 3] * kRadToDeg);
  }
}

Quat OrientationFilter::update(const Quat& measured_in, const double* gyro, double dt_s) {
  const Quat measured = normalized(measured_in);
  if (!initialized_ || !(dt_s > 0) || dt_s > config_.max_gap_s || !std::isfinite(dt_s)) {
    // Nothing to smooth towards, or an unknown gap: start from the measurement, at rest.
    state_ = measured;
    previous_ = measured;
    initialized_ = true;
    for (double& v : velocity_) v = 0;
    speed_ = 0;
    cutoff_hz_ = 0;
    gyro_silent_ = true;
    return measured;
  }
  dt_s = std::max(dt_s, 1e-4);

  // Angular velocity from successive orientations (head frame): dq = conj(prev) * q. It is kept
  // up to date even while the gyro reports, so a gyro that falls silent hands over smoothly.
  Quat dq = multiply(conjugate(previous_), measured);
  if (dq.w < 0) dq = {-dq.w, -dq.x, -dq.y, -dq.z};
  double est[3];
  rotation_vector_from_quat(dq, est);
  previous_ = measured;
  // Differentiating multiplies the sensor noise by 1/dt; the low-pass averages it back down. On a
  // vector, not on its length, so that noise in opposite directions cancels instead of adding up.
  const double a_speed = 1.0 - std::exp(-2 * kPi * std::max(config_.speed_cutoff_hz, 0.0) * dt_s);
  for (int i = 0; i < 3; ++i) {
    velocity_[i] += a_speed * (est[i] / dt_s - velocity_[i]);
    if (!std::isfinite(velocity_[i])) velocity_[i] = 0;
  }

  double gyro_speed = 0;
  if (gyro) gyro_speed = std::sqrt(gyro[0] * gyro[0] + gyro[1] * gyro[1] + gyro[2] * gyro[2]);
  if (!std::isfinite(gyro_speed)) gyro_speed = 0;
  gyro_silent_ = gyro_speed == 0;
  // A reporting gyro measures speed directly, without the noise and delay of the estimate.
  speed_ = gyro_silent_ ? std::sqrt(velocity_[0] * velocity_[0] + velocity_[1] * velocity_[1] +
                                    velocity_[2] * velocity_[2])
                        : gyro_speed;

  const double tau = std::clamp(config_.smoothing, 0.0, 1.0) * FilterConfig::kMaxRestTimeConstantS;
  double alpha = 1;
  cutoff_hz_ = INFINITY;
  if (tau > 0) {
    const double knee = std::max(config_.speed_knee_rad_s, 0.0);
    // speed * (speed / (speed + knee)): the ratio is at most 1, so no overflow to inf / inf.
    const double kneed = speed_ > 0 ? speed_ * (speed_ / (speed_ + knee)) : 0;
    cutoff_hz_ = 1.0 / (2 * kPi * tau) + std::max(config_.speed_gain_hz_per_rad_s, 0.0) * kneed;
    // Exact discretisation of a first-order low-pass: stays right when dt is long against the
    // time constant (a turn at 25 Hz), where the usual dt / (dt + tau) would under-react.
    alpha = 1.0 - std::exp(-2 * kPi * cutoff_hz_ * dt_s);
  }
  state_ = slerp(state_, measured, alpha);
  if (!finite(state_)) state_ = measured;

  if (config_.predict_ms <= 0) return state_;
  // Prediction uses the smoothed estimate, not the raw difference: extrapolating raw noise
  // would multiply it by predict_ms / dt.
  const double* w = gyro_silent_ ? velocity_ : gyro;
  const double h = config_.predict_ms / 1000.0;
  return normalized(multiply(state_, exp_rotation(w[0] * h, w[1] * h, w[2] * h)));
}

PosePipeline::PosePipeline(PipelineConfig config) : config_(config), filter_(config.filter) {}

void PosePipeline::reset() {
  filter_.reset();
  center_ = Quat{};
  started_ = false;
  have_counter_ = false;
  pose_ = Pose{};
}

const Pose& PosePipeline::process(const TrackerSample& s, double dt_s) {
  const Quat raw = quat_from_rotation_vector(s.rotation);
  pose_.recentered = false;
  bool recenter = recenter_pending_ || (!started_ && config_.recenter_on_start);
  if (s.has_counter) {
    if (have_counter_ && s.counter != last_counter_) {
      recenter = true;  // the device moved its reference frame: Android recenters here too
      ++pose_.discontinuities;
    }
    have_counter_ = true;
    last_counter_ = s.counter;
    pose_.counter = s.counter;
  }
  if (recenter) {
    center_ = raw;
    recenter_pending_ = false;
    filter_.reset();
    pose_.recentered = true;
  }
  started_ = true;
  const Quat relative = normalized(multiply(conjugate(center_), raw));
  const Quat out =
      filter_.update(relative, s.has_angular_velocity ? s.angular_velocity : nullptr, dt_s);
  pose_.raw = raw;
  pose_.orientation = finite(out) ? out : Quat{};
  pose_.angular_speed = std::isfinite(filter_.angular_speed()) ? filter_.angular_speed() : 0;
  map_axes(config_.axes, head_euler(pose_.orientation), pose_.ypr_deg);
  return pose_;
}

}  // namespace syncd::headtrack
