// Independent ROS 2-compatible sensor_msgs/Image peer on eProsima Fast DDS 2.9
// (Debian 12 libfastrtps-dev), for freight's interop tests. Same CLI and JSON
// lines as ../dds_interop/peer.py, a second DDS implementation next to Cyclone:
//
//   peer sub --topic /t --count N --timeout S [--domain D]
//   peer pub --topic /t --count N --width W --height H [--wait-readers K] [--period-ms P] [--domain D]
//   (both also take --reliability reliable|best_effort and --depth N)
//
// Wire conventions of rmw_fastrtps: DDS topic "rt/<topic>", type name
// "sensor_msgs::msg::dds_::Image_", plain CDR (XCDR1). The type support below is
// written by hand (no fastddsgen, no fastcdr). Discovery is unicast on loopback
// only: SPDP goes to 127.0.0.1 on the well-known ports of participant indices
// 0..64, which is where Cyclone DDS (ParticipantIndex auto) and other Fast DDS
// peers listen. pub holds frame 0 back for 1.5 s after matching (see run_pub).
// stdout carries JSON lines only; Fast DDS logs go to stderr
// (errors only, everything with FASTDDS_PEER_VERBOSE set).
// Exit codes: 0 ok, 1 setup failed, 2 sub timeout, 3 pub found no reader, 64 usage.
#include <fastdds/dds/domain/DomainParticipant.hpp>
#include <fastdds/dds/domain/DomainParticipantFactory.hpp>
#include <fastdds/dds/log/Log.hpp>
#include <fastdds/dds/log/StdoutErrConsumer.hpp>
#include <fastdds/dds/publisher/DataWriter.hpp>
#include <fastdds/dds/publisher/Publisher.hpp>
#include <fastdds/dds/subscriber/DataReader.hpp>
#include <fastdds/dds/subscriber/SampleInfo.hpp>
#include <fastdds/dds/subscriber/Subscriber.hpp>
#include <fastdds/dds/topic/TopicDataType.hpp>
#include <fastdds/dds/topic/TypeSupport.hpp>
#include <fastdds/rtps/transport/UDPv4TransportDescriptor.h>
#include <fastrtps/utils/IPLocator.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

using namespace eprosima::fastdds::dds;
using eprosima::fastrtps::Duration_t;
using eprosima::fastrtps::rtps::SerializedPayload_t;
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the CDR writer assumes a little-endian host");

// ---- SHA-256 (FIPS 180-4); round constants derived from the primes at start --
struct Sha256 {
    uint32_t k[64], h[8];
    Sha256() {
        int primes[64], n = 0;
        for (int c = 2; n < 64; ++c) {
            bool prime = true;
            for (int d = 2; d * d <= c; ++d) prime = prime && c % d;
            if (prime) primes[n++] = c;
        }
        auto frac32 = [](long double x) { return uint32_t((x - floorl(x)) * 4294967296.0L); };
        for (int i = 0; i < 64; ++i) k[i] = frac32(cbrtl(primes[i]));
        for (int i = 0; i < 8; ++i) h[i] = frac32(sqrtl(primes[i]));
    }
    static uint32_t rotr(uint32_t x, int r) { return x >> r | x << (32 - r); }
    void block(const uint8_t* p) {
        uint32_t w[64], s[8];
        for (int i = 0; i < 16; ++i) w[i] = uint32_t(p[4 * i]) << 24 | p[4 * i + 1] << 16 | p[4 * i + 2] << 8 | p[4 * i + 3];
        for (int i = 16; i < 64; ++i) {
            uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ w[i - 15] >> 3;
            uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ w[i - 2] >> 10;
            w[i] = w[i - 16] + s0 + w[i - 7] + s1;
        }
        memcpy(s, h, sizeof s);
        for (int i = 0; i < 64; ++i) {
            uint32_t t1 = s[7] + (rotr(s[4], 6) ^ rotr(s[4], 11) ^ rotr(s[4], 25)) + ((s[4] & s[5]) ^ (~s[4] & s[6])) + k[i] + w[i];
            uint32_t t2 = (rotr(s[0], 2) ^ rotr(s[0], 13) ^ rotr(s[0], 22)) + ((s[0] & s[1]) ^ (s[0] & s[2]) ^ (s[1] & s[2]));
            memmove(s + 1, s, 7 * sizeof(uint32_t));
            s[4] += t1;
            s[0] = t1 + t2;
        }
        for (int i = 0; i < 8; ++i) h[i] += s[i];
    }
    static std::string hex(const std::vector<uint8_t>& data) {
        Sha256 c;
        size_t n = data.size(), full = n / 64 * 64;
        for (size_t i = 0; i < full; i += 64) c.block(data.data() + i);
        uint8_t tail[128] = {0};
        memcpy(tail, data.data() + full, n - full);
        tail[n - full] = 0x80;
        size_t len = n - full + 9 <= 64 ? 64 : 128;
        for (int i = 0; i < 8; ++i) tail[len - 1 - i] = uint8_t(uint64_t(n) * 8 >> (8 * i));
        for (size_t i = 0; i < len; i += 64) c.block(tail + i);
        char out[65];
        for (int i = 0; i < 8; ++i) snprintf(out + 8 * i, 9, "%08x", c.h[i]);
        return out;
    }
};

// ---- sensor_msgs/Image and its ROS 2 CDR type support ---------------------
struct Image {
    int32_t sec = 0;
    uint32_t nanosec = 0, height = 0, width = 0, step = 0;
    std::string frame_id, encoding;
    uint8_t is_bigendian = 0;
    std::vector<uint8_t> data;
};

// Writes (or, with buf == nullptr, only measures) a little-endian CDR body.
// Offsets, and so alignment, count from the end of the encapsulation header.
struct CdrOut {
    uint8_t* buf;
    size_t pos = 0;
    void put(const void* p, size_t n) { if (buf) memcpy(buf + pos, p, n); pos += n; }
    void align(size_t a) { size_t pad = (a - pos % a) % a; if (buf) memset(buf + pos, 0, pad); pos += pad; }
    void u8(uint8_t v) { put(&v, 1); }
    void u32(uint32_t v) { align(4); put(&v, 4); }
    void str(const std::string& s) { u32(uint32_t(s.size() + 1)); put(s.c_str(), s.size() + 1); }  // length counts the NUL
};

// Reads a CDR body of either endianness; any overrun clears `ok`.
struct CdrIn {
    const uint8_t* p;
    size_t n, pos = 0;
    bool swap, ok = true;
    bool have(size_t k) { if (ok && pos <= n && n - pos >= k) return true; ok = false; return false; }
    void align(size_t a) { pos += (a - pos % a) % a; }
    uint8_t u8() { return have(1) ? p[pos++] : 0; }
    uint32_t u32() {
        align(4);
        uint32_t v = 0;
        if (have(4)) memcpy(&v, p + pos, 4), pos += 4;
        return swap ? __builtin_bswap32(v) : v;
    }
    std::string str() {
        uint32_t len = u32();
        if (len == 0 || !have(len)) return ok = false, std::string();
        std::string s(reinterpret_cast<const char*>(p + pos), len - 1);
        pos += len;
        return s;
    }
};

template <class W> void encode(W& w, const Image& m) {
    w.u32(uint32_t(m.sec)), w.u32(m.nanosec), w.str(m.frame_id);  // std_msgs/Header
    w.u32(m.height), w.u32(m.width), w.str(m.encoding), w.u8(m.is_bigendian), w.u32(m.step);
    w.u32(uint32_t(m.data.size())), w.put(m.data.data(), m.data.size());  // sequence<uint8>
}

static uint32_t serialized_size(const Image& m) { CdrOut w{nullptr}; encode(w, m); return uint32_t(4 + w.pos); }

class ImageType : public TopicDataType {
public:
    ImageType() {
        setName("sensor_msgs::msg::dds_::Image_");
        m_typeSize = 64u << 20;  // upper bound for one sample: 64 MiB
        m_isGetKeyDefined = false;  // keyless, like every ROS 2 message
        auto_fill_type_object(false);
        auto_fill_type_information(false);
    }
    bool serialize(void* data, SerializedPayload_t* payload) override {
        const Image& m = *static_cast<Image*>(data);
        uint32_t size = serialized_size(m);
        if (size > payload->max_size) return false;
        const uint8_t header[4] = {0x00, 0x01, 0x00, 0x00};  // CDR_LE, no options
        memcpy(payload->data, header, 4);
        CdrOut w{payload->data + 4};
        encode(w, m);
        payload->length = size;
        payload->encapsulation = CDR_LE;
        return true;
    }
    bool deserialize(SerializedPayload_t* payload, void* data) override {
        if (payload->length < 4 || payload->data[0] != 0x00 || payload->data[1] > 0x01) return false;  // plain CDR only
        CdrIn r{payload->data + 4, payload->length - 4, 0, payload->data[1] == 0x00};  // 00 00: CDR_BE
        Image& m = *static_cast<Image*>(data);
        m.sec = int32_t(r.u32()), m.nanosec = r.u32(), m.frame_id = r.str();
        m.height = r.u32(), m.width = r.u32(), m.encoding = r.str(), m.is_bigendian = r.u8(), m.step = r.u32();
        uint32_t len = r.u32();
        if (!r.have(len)) return false;
        m.data.assign(r.p + r.pos, r.p + r.pos + len);
        return true;
    }
    std::function<uint32_t()> getSerializedSizeProvider(void* data) override {
        uint32_t size = data ? serialized_size(*static_cast<Image*>(data)) : m_typeSize;
        return [size] { return size; };
    }
    void* createData() override { return new Image(); }
    void deleteData(void* data) override { delete static_cast<Image*>(data); }
    bool getKey(void*, eprosima::fastrtps::rtps::InstanceHandle_t*, bool) override { return false; }
};

// ---- command line, output -----------------------------------------------
struct Args {
    std::string mode, topic = "/camera/image", reliability = "reliable";
    double timeout = 30, period_ms = 50;
    int count = 1, domain = 0, depth = 10, width = 640, height = 480, wait_readers = 1;
};

static void emit(const std::string& json) { fwrite(json.data(), 1, json.size(), stdout), fputc('\n', stdout), fflush(stdout); }

static std::string quote(const std::string& s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') out += '\\', out += char(c);
        else if (c < 0x20) { char u[7]; snprintf(u, sizeof u, "\\u%04x", c); out += u; }
        else out += char(c);
    }
    return out + "\"";
}

static std::string describe(const Image& m) {  // the key order and spacing of Python's json.dumps
    return "{\"frame_id\": " + quote(m.frame_id) + ", \"sec\": " + std::to_string(m.sec) + ", \"nanosec\": " +
           std::to_string(m.nanosec) + ", \"height\": " + std::to_string(m.height) + ", \"width\": " +
           std::to_string(m.width) + ", \"encoding\": " + quote(m.encoding) + ", \"step\": " + std::to_string(m.step) +
           ", \"len\": " + std::to_string(m.data.size()) + ", \"sha256\": \"" + Sha256::hex(m.data) + "\"}";
}

static void log(const std::string& text) { fprintf(stderr, "fastdds peer: %s\n", text.c_str()); }

// ---- DDS entities ---------------------------------------------------------
static DomainParticipant* make_participant(int domain) {
    DomainParticipantQos qos;
    qos.name("freight_fastdds_peer");
    // UDPv4 on 127.0.0.1 only; no shared-memory transport, no multicast.
    auto udp = std::make_shared<eprosima::fastdds::rtps::UDPv4TransportDescriptor>();
    udp->interfaceWhiteList.push_back("127.0.0.1");
    udp->maxInitialPeersRange = 65;  // a port-less initial peer expands to participant ids 0..64
    udp->sendBufferSize = udp->receiveBufferSize = 4u << 20;
    qos.transport().user_transports.push_back(udp);
    qos.transport().use_builtin_transports = false;
    eprosima::fastrtps::rtps::Locator_t local;  // UDPv4, port 0: the well-known port of this participant
    eprosima::fastrtps::rtps::IPLocator::setIPv4(local, 127, 0, 0, 1);
    auto& builtin = qos.wire_protocol().builtin;
    builtin.metatrafficUnicastLocatorList.push_back(local);  // listening locators given explicitly:
    qos.wire_protocol().default_unicast_locator_list.push_back(local);  // no multicast ones are added
    builtin.initialPeersList.push_back(local);
    return DomainParticipantFactory::get_instance()->create_participant(domain, qos);
}

template <class Qos> static void common_qos(Qos& q, const Args& a) {
    q.reliability().kind = a.reliability == "reliable" ? RELIABLE_RELIABILITY_QOS : BEST_EFFORT_RELIABILITY_QOS;
    q.reliability().max_blocking_time = Duration_t(1, 0);
    q.durability().kind = VOLATILE_DURABILITY_QOS;
    q.history().kind = KEEP_LAST_HISTORY_QOS;
    q.history().depth = a.depth;
    q.endpoint().history_memory_policy = eprosima::fastrtps::rtps::DYNAMIC_RESERVE_MEMORY_MODE;  // sized per sample
    q.data_sharing().off();
}

static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

static int run_sub(const Args& a, DomainParticipant* dp, Topic* topic) {
    DataReaderQos qos = DATAREADER_QOS_DEFAULT;
    common_qos(qos, a);
    qos.type_consistency().representation.m_value = {XCDR_DATA_REPRESENTATION};  // plain CDR
    DataReader* reader = dp->create_subscriber(SUBSCRIBER_QOS_DEFAULT)->create_datareader(topic, qos);
    if (!reader) return log("could not create the reader"), 1;
    emit("{\"ready\": true}");
    double deadline = now() + a.timeout;
    int got = 0;
    Image m;
    SampleInfo info;
    while (got < a.count) {
        while (got < a.count && reader->take_next_sample(&m, &info) == ReturnCode_t::RETCODE_OK)
            if (info.valid_data) emit(describe(m)), ++got;
        double left = deadline - now();
        if (got >= a.count) break;
        if (left <= 0) return log("timeout: received " + std::to_string(got) + " of " + std::to_string(a.count)), 2;
        reader->wait_for_unread_message(Duration_t(std::min(left, 0.5)));
    }
    return 0;
}

static int run_pub(const Args& a, DomainParticipant* dp, Topic* topic) {
    DataWriterQos qos = DATAWRITER_QOS_DEFAULT;
    common_qos(qos, a);
    qos.representation().m_value = {XCDR_DATA_REPRESENTATION};  // plain CDR
    // Synchronous, rmw_fastrtps's default: Fast DDS 2.9 fragments large samples in this mode too.
    qos.publish_mode().kind = SYNCHRONOUS_PUBLISH_MODE;
    qos.liveliness().kind = MANUAL_BY_TOPIC_LIVELINESS_QOS;  // assert_liveliness() sends a HEARTBEAT, see below
    qos.liveliness().lease_duration = Duration_t(3600, 0);
    qos.liveliness().announcement_period = Duration_t(1800, 0);
    DataWriter* writer = dp->create_publisher(PUBLISHER_QOS_DEFAULT)->create_datawriter(topic, qos);
    if (!writer) return log("could not create the writer"), 1;
    PublicationMatchedStatus st;
    double deadline = now() + 20;
    while (writer->get_publication_matched_status(st), st.current_count < a.wait_readers) {
        if (now() > deadline)
            return log("no match: " + std::to_string(st.current_count) + " of " + std::to_string(a.wait_readers) +
                       " readers after 20 s"), 3;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    emit("{\"matched\": " + std::to_string(st.current_count) + "}");
    // "Matched" means this writer knows the reader, not that the reader knows this writer, and a Cyclone
    // DDS volatile reader skips every sample up to the last sequence number of the first HEARTBEAT it
    // accepts from a writer (it takes that as "where the writer is now"). Fast DDS ignores Cyclone's
    // pre-emptive ACKNACK (count 0), so Cyclone may learn of this writer only from Fast DDS's next SEDP
    // heartbeat (every 1 s), and the first HEARTBEAT of this writer it would then see is the one sent
    // with the first frame: frame 0 was lost about half the time. So for 1.5 s before writing anything,
    // send a liveliness HEARTBEAT (empty history: 1..0) every 100 ms, which tells a reader to start at 1.
    for (int i = 0; i < 15; ++i) {
        writer->assert_liveliness();
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    size_t n = size_t(a.width) * a.height * 4;
    std::vector<uint8_t> pattern(n + 251);  // byte i of frame k is (i*7 + k) % 251 == pattern[i + 36*k % 251]
    for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = uint8_t(i * 7 % 251);
    Image m;
    m.height = a.height, m.width = a.width, m.encoding = "bgra8", m.step = a.width * 4;
    for (int k = 0; k < a.count; ++k) {
        if (k) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(a.period_ms));
        m.sec = k, m.nanosec = uint32_t(k) * 1000, m.frame_id = "frame" + std::to_string(k);
        size_t j = 36 * size_t(k) % 251;  // 7*36 = 1 (mod 251)
        m.data.assign(pattern.begin() + j, pattern.begin() + j + n);
        if (!writer->write(&m)) log("write failed for frame " + std::to_string(k));
        emit(describe(m));
    }
    if (a.reliability == "reliable" && writer->wait_for_acknowledgments(Duration_t(10, 0)) != ReturnCode_t::RETCODE_OK)
        log("wait_for_acknowledgments timed out");
    std::this_thread::sleep_for(std::chrono::seconds(1));  // let reliable repair finish
    return 0;
}

int main(int argc, char** argv) {
    Args a;
    if (const char* d = getenv("ROS_DOMAIN_ID"); d && *d) a.domain = atoi(d);
    std::map<std::string, std::string> opt;
    for (int i = 2; i + 1 < argc; i += 2) opt[argv[i]] = argv[i + 1];
    bool usage = argc < 2 || argc % 2 != 0;
    if (!usage) a.mode = argv[1];
    for (auto& [key, v] : opt) {
        if (key == "--topic") a.topic = v;
        else if (key == "--reliability") a.reliability = v;
        else if (key == "--count") a.count = atoi(v.c_str());
        else if (key == "--timeout") a.timeout = atof(v.c_str());
        else if (key == "--domain") a.domain = atoi(v.c_str());
        else if (key == "--depth") a.depth = atoi(v.c_str());
        else if (key == "--width") a.width = atoi(v.c_str());
        else if (key == "--height") a.height = atoi(v.c_str());
        else if (key == "--wait-readers") a.wait_readers = atoi(v.c_str());
        else if (key == "--period-ms") a.period_ms = atof(v.c_str());
        else usage = true;
    }
    if (usage || (a.mode != "sub" && a.mode != "pub") || (a.reliability != "reliable" && a.reliability != "best_effort")) {
        fprintf(stderr, "usage: %s sub|pub [--topic T] [--count N] [--timeout S] [--domain D] [--width W] [--height H]\n"
                        "       [--wait-readers K] [--period-ms P] [--reliability reliable|best_effort] [--depth N]\n", argv[0]);
        return 64;
    }
    unsetenv("ROS_DISCOVERY_SERVER");  // would turn this participant into a discovery-server client
    Log::ClearConsumers();  // the default consumer writes to stdout, which is for JSON only
    auto to_stderr = new StdoutErrConsumer();
    to_stderr->stderr_threshold(Log::Kind::Info);
    Log::RegisterConsumer(std::unique_ptr<LogConsumer>(to_stderr));
    Log::SetVerbosity(getenv("FASTDDS_PEER_VERBOSE") ? Log::Kind::Info : Log::Kind::Error);
    DomainParticipant* dp = make_participant(a.domain);
    if (!dp) return log("could not create the participant"), 1;
    TypeSupport type(new ImageType());
    type.register_type(dp);
    size_t first = a.topic.find_first_not_of('/');  // ROS 2 topic "/a/b" is DDS topic "rt/a/b"
    std::string name = "rt/" + (first == std::string::npos ? std::string() : a.topic.substr(first));
    Topic* topic = dp->create_topic(name, type.get_type_name(), TOPIC_QOS_DEFAULT);
    int rc = !topic ? (log("could not create the topic"), 1) : a.mode == "sub" ? run_sub(a, dp, topic) : run_pub(a, dp, topic);
    dp->delete_contained_entities();
    DomainParticipantFactory::get_instance()->delete_participant(dp);
    Log::Flush();
    return rc;
}
