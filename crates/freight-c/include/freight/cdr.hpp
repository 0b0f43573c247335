// freight's C++ message runtime: freight::Buffer, the field type of large
// arrays, and the CDR codec the generated message headers
// (freight/msgs/<package>.hpp) write and read their fields with. The encoding
// is ROS 2's (XCDR1, little endian, 4-byte encapsulation header), byte for
// byte what freight's Rust types write.
//
//   freight::msgs::std_msgs::UInt8MultiArray msg;
//   msg.data = std::vector<std::uint8_t>(1024, 7);
//   std::vector<std::uint8_t> wire = freight::cdr::to_cdr(msg);
//   auto back = freight::cdr::from_cdr<freight::msgs::std_msgs::UInt8MultiArray>(wire.data(), wire.size());
#ifndef FREIGHT_CDR_HPP
#define FREIGHT_CDR_HPP

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace freight {

// The elements of a large array field (an image's pixels, a point cloud's
// points): read-only, shared on copy, and either owned (assigned from a
// std::vector) or a view of memory kept alive with it (a received sample's
// shared memory, a loan). data() and size() make it a std::span<const T>.
// In device memory (a "cuda" sample or loan) data() is nullptr and
// device_ptr() the device's address of the elements.
template <typename T>
class Buffer {
  static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>, "a Buffer holds numbers");

public:
  using value_type = T;
  using const_iterator = const T *;

  Buffer() = default;

  // Takes the vector's elements (no copy).
  Buffer(std::vector<T> elements) {  // NOLINT: implicit on purpose (msg.data = std::vector<...>)
    auto owned = std::make_shared<std::vector<T>>(std::move(elements));
    data_ = owned->data();
    size_ = owned->size();
    keep_ = std::move(owned);
  }

  Buffer &operator=(std::vector<T> elements) { return *this = Buffer(std::move(elements)); }

  // `size` elements at `data` (the host's address, nullptr for device
  // memory) and `device` (a device's address, 0 for none), valid while
  // `keep` lives.
  static Buffer view(const T *data, std::size_t size, std::shared_ptr<const void> keep, std::uint64_t device = 0) {
    Buffer b;
    b.data_ = data;
    b.size_ = size;
    b.keep_ = std::move(keep);
    b.device_ = device;
    return b;
  }

  // Where a device addresses the elements (a CUdeviceptr, usable as a
  // CUDA runtime pointer); nullptr when no device does.
  void *device_ptr() const noexcept { return reinterpret_cast<void *>(static_cast<std::uintptr_t>(device_)); }

  const T *data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  const T &operator[](std::size_t i) const noexcept { return data_[i]; }
  const T *begin() const noexcept { return data_; }
  const T *end() const noexcept { return data_ + size_; }

  // A copy of the elements.
  std::vector<T> to_vector() const { return std::vector<T>(begin(), end()); }

  // Equal elements; two buffers in device memory are equal only if they
  // are the same memory (the host cannot read them).
  friend bool operator==(const Buffer &a, const Buffer &b) {
    if (a.size_ != b.size_) {
      return false;
    }
    if (a.size_ == 0) {
      return true;
    }
    if (a.data_ == nullptr || b.data_ == nullptr) {
      return a.data_ == b.data_ && a.device_ == b.device_;
    }
    return std::memcmp(a.data_, b.data_, a.size_ * sizeof(T)) == 0;
  }
  friend bool operator!=(const Buffer &a, const Buffer &b) { return !(a == b); }

private:
  const T *data_ = nullptr;
  std::size_t size_ = 0;
  std::shared_ptr<const void> keep_;
  std::uint64_t device_ = 0;
};

namespace cdr {

// CDR that cannot be decoded: where, and why.
class DecodeError : public std::runtime_error {
public:
  DecodeError(std::size_t offset, const std::string &what)
      : std::runtime_error("CDR at byte " + std::to_string(offset) + ": " + what), offset_(offset) {}
  std::size_t offset() const noexcept { return offset_; }

private:
  std::size_t offset_;
};

// Writes CDR: the encapsulation header, then fields aligned to their size
// (counted from after the header).
class Writer {
public:
  // Room for a small message's fields up front: growing from the 4-byte
  // header would allocate again for each doubling.
  Writer() {
    bytes_.reserve(64);
    bytes_.insert(bytes_.end(), {0x00, 0x01, 0x00, 0x00});
  }

  void align(std::size_t n) {
    const std::size_t pad = (n - (bytes_.size() - 4) % n) % n;
    bytes_.insert(bytes_.end(), pad, 0);
  }

  template <typename T>
  void write(T v) {
    static_assert(std::is_arithmetic_v<T>);
    if constexpr (std::is_same_v<T, bool>) {
      bytes_.push_back(v ? 1 : 0);
    } else {
      align(sizeof(T));
      raw(&v, sizeof(T));
    }
  }

  // A sequence or string length.
  void length(std::size_t n) {
    if (n > UINT32_MAX) {
      throw std::length_error("a CDR sequence holds at most 2^32 - 1 elements, not " + std::to_string(n));
    }
    write(static_cast<std::uint32_t>(n));
  }

  void string(const std::string &s) {
    length(s.size() + 1);
    raw(s.data(), s.size());
    bytes_.push_back(0);
  }

  void raw(const void *data, std::size_t n) {
    const auto *p = static_cast<const std::uint8_t *>(data);
    bytes_.insert(bytes_.end(), p, p + n);
  }

  const std::vector<std::uint8_t> &bytes() const noexcept { return bytes_; }
  std::vector<std::uint8_t> finish() && { return std::move(bytes_); }

private:
  std::vector<std::uint8_t> bytes_;
};

// Reads CDR, checking every length against what is left before it allocates.
class Reader {
public:
  Reader(const std::uint8_t *data, std::size_t size) : data_(data), size_(size) {
    if (size < 4 || data[0] != 0x00 || data[1] != 0x01) {
      throw DecodeError(0, "not CDR little endian (encapsulation 0x0001)");
    }
    pos_ = 4;
  }

  std::size_t remaining() const noexcept { return size_ - pos_; }
  std::size_t position() const noexcept { return pos_; }

  const std::uint8_t *take(std::size_t n) {
    if (n > remaining()) {
      throw DecodeError(pos_, std::to_string(n) + " bytes needed, " + std::to_string(remaining()) + " left");
    }
    const std::uint8_t *p = data_ + pos_;
    pos_ += n;
    return p;
  }

  void align(std::size_t n) { take((n - (pos_ - 4) % n) % n); }

  template <typename T>
  T read() {
    static_assert(std::is_arithmetic_v<T>);
    if constexpr (std::is_same_v<T, bool>) {
      const std::uint8_t b = *take(1);
      if (b > 1) {
        throw DecodeError(pos_ - 1, "a bool is 0 or 1, not " + std::to_string(b));
      }
      return b == 1;
    } else {
      align(sizeof(T));
      T v;
      std::memcpy(&v, take(sizeof(T)), sizeof(T));
      return v;
    }
  }

  // A length of elements of at least `min_element_size` bytes each, checked
  // against what is left.
  std::size_t length(std::size_t min_element_size) {
    const std::uint64_t n = read<std::uint32_t>();
    if (n * min_element_size > remaining()) {
      throw DecodeError(pos_ - 4, "a length of " + std::to_string(n) + " exceeds the " +
                                      std::to_string(remaining()) + " bytes left");
    }
    return static_cast<std::size_t>(n);
  }

  std::string string() {
    const std::size_t n = length(1);
    if (n == 0) {
      throw DecodeError(pos_ - 4, "a string without its NUL");
    }
    const auto *p = reinterpret_cast<const char *>(take(n));
    if (p[n - 1] != '\0') {
      throw DecodeError(pos_ - 1, "a string not ended by NUL");
    }
    return std::string(p, n - 1);
  }

  // Only end padding (under 4 bytes) may be left.
  void finish() const {
    if (remaining() >= 4) {
      throw DecodeError(pos_, std::to_string(remaining()) + " bytes after the message");
    }
  }

private:
  const std::uint8_t *data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

// Where the buffer fields of a message go when it is written: inline as CDR
// sequences (ROS 2's wire form, InlineSink), or elsewhere with only an
// ordinal in the CDR (how freight's frames carry them beside the fields).
class BufferSink {
public:
  virtual ~BufferSink() = default;
  virtual void write(Writer &w, const void *data, std::size_t count, std::size_t element_size) = 0;
};

// Where the buffer fields of a message come from when it is read. `keep` is
// what the returned memory lives with (empty: the Buffer copies it).
class BufferSource {
public:
  virtual ~BufferSource() = default;
  struct Memory {
    const void *data;  // nullptr for device memory
    std::size_t bytes;
    std::shared_ptr<const void> keep;
    std::uint64_t device = 0;  // where a device addresses it; 0: none
  };
  virtual Memory read(Reader &r, std::size_t element_size) = 0;
};

class InlineSink final : public BufferSink {
public:
  void write(Writer &w, const void *data, std::size_t count, std::size_t element_size) override {
    w.length(count);
    if (count > 0) {
      w.align(element_size);
    }
    w.raw(data, count * element_size);
  }
};

class InlineSource final : public BufferSource {
public:
  Memory read(Reader &r, std::size_t element_size) override {
    const std::size_t count = r.length(element_size);
    if (count > 0) {
      r.align(element_size);
    }
    return Memory{r.take(count * element_size), count * element_size, nullptr};
  }
};

// Buffer fields as their ordinals, each buffer noted: how freight's frames
// carry a message, and how one crosses the C ABI (freight.h).
class OrdinalSink final : public BufferSink {
public:
  struct Noted {
    const void *data;
    std::size_t bytes;
  };
  void write(Writer &w, const void *data, std::size_t count, std::size_t element_size) override {
    w.write(static_cast<std::uint32_t>(noted_.size()));
    noted_.push_back(Noted{data, count * element_size});
  }
  const std::vector<Noted> &buffers() const noexcept { return noted_; }

private:
  std::vector<Noted> noted_;
};

// Buffer fields read as ordinals, each taken from `buffers` (which say what
// keeps their memory alive), in order.
class OrdinalSource final : public BufferSource {
public:
  explicit OrdinalSource(std::vector<Memory> buffers) : buffers_(std::move(buffers)) {}
  Memory read(Reader &r, std::size_t) override {
    const std::uint32_t i = r.read<std::uint32_t>();
    if (i != next_ || i >= buffers_.size()) {
      throw DecodeError(r.position() - 4, "buffer " + std::to_string(i) + " where buffer " + std::to_string(next_) +
                                              " of " + std::to_string(buffers_.size()) + " was due");
    }
    ++next_;
    return buffers_[i];
  }
  std::size_t used() const noexcept { return next_; }

private:
  std::vector<Memory> buffers_;
  std::uint32_t next_ = 0;
};

// ---- Fields: numbers, strings, arrays, sequences, buffers ----------------
// Messages add overloads of cdr_write / cdr_read in their own namespace;
// argument-dependent lookup (through Writer and Reader) finds these.

template <typename T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
void cdr_write(Writer &w, BufferSink &, const T &v) {
  w.write(v);
}

template <typename T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
void cdr_read(Reader &r, BufferSource &, T &v) {
  v = r.read<T>();
}

inline void cdr_write(Writer &w, BufferSink &, const std::string &s) { w.string(s); }
inline void cdr_read(Reader &r, BufferSource &, std::string &s) { s = r.string(); }

template <typename T, std::size_t N>
void cdr_write(Writer &w, BufferSink &b, const std::array<T, N> &a) {
  for (const T &v : a) {
    cdr_write(w, b, v);
  }
}

template <typename T, std::size_t N>
void cdr_read(Reader &r, BufferSource &b, std::array<T, N> &a) {
  for (T &v : a) {
    cdr_read(r, b, v);
  }
}

template <typename T>
void cdr_write(Writer &w, BufferSink &b, const std::vector<T> &items) {
  w.length(items.size());
  for (const T &v : items) {
    cdr_write(w, b, v);
  }
}

template <typename T>
void cdr_read(Reader &r, BufferSource &b, std::vector<T> &items) {
  // Every element is at least a byte on the wire (a string four), so a
  // hostile length fails here before anything is allocated.
  const std::size_t n = r.length(std::is_same_v<T, std::string> ? 4 : 1);
  items.clear();
  items.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    T v{};
    cdr_read(r, b, v);
    items.push_back(std::move(v));
  }
}

template <typename T>
void cdr_write(Writer &w, BufferSink &b, const Buffer<T> &buffer) {
  b.write(w, buffer.data(), buffer.size(), sizeof(T));
}

template <typename T>
void cdr_read(Reader &r, BufferSource &b, Buffer<T> &buffer) {
  BufferSource::Memory m = b.read(r, sizeof(T));
  if (m.bytes % sizeof(T) != 0) {
    throw DecodeError(r.position(), std::to_string(m.bytes) + " bytes is not a whole number of " +
                                        std::to_string(sizeof(T)) + "-byte elements");
  }
  const std::size_t count = m.bytes / sizeof(T);
  if (m.keep) {
    buffer = Buffer<T>::view(static_cast<const T *>(m.data), count, std::move(m.keep), m.device);
  } else {
    std::vector<T> copy(count);
    if (count > 0) {
      std::memcpy(copy.data(), m.data, m.bytes);
    }
    buffer = std::move(copy);
  }
}

// ---- Whole messages ---------------------------------------------------------

// `msg` as ROS 2 CDR, buffers inline: what a stock ROS 2 node sends.
template <typename M>
std::vector<std::uint8_t> to_cdr(const M &msg) {
  Writer w;
  InlineSink inline_buffers;
  cdr_write(w, inline_buffers, msg);
  return std::move(w).finish();
}

// A message of type M from ROS 2 CDR; throws DecodeError on malformed input.
template <typename M>
M from_cdr(const std::uint8_t *data, std::size_t size) {
  Reader r(data, size);
  InlineSource inline_buffers;
  M msg{};
  cdr_read(r, inline_buffers, msg);
  r.finish();
  return msg;
}

}  // namespace cdr
}  // namespace freight

#endif  // FREIGHT_CDR_HPP
