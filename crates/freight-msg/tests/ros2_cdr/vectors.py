#!/usr/bin/env python3
"""Reference CDR vectors for freight, made with rosbags (an independent, pure-Python
ROS 2 serializer; `pip install rosbags`).

Modes:

    vectors.py encode
        Prints {"rosbags": VERSION, "store": STORE, "cases": [CASE, ...]} where a
        CASE is {"name", "type", "fields", "cdr"}: `fields` are the message's field
        values in the schema below, `cdr` the hex of rosbags' serialization of them.

    vectors.py decode TYPE        (stdin: hex of one CDR message)
    vectors.py decode             (stdin: lines "TYPE HEX", one message per line)
        Deserializes with rosbags and prints the fields it read, in the same schema:
        {"fields": ...} for one message; a JSON list of {"type", "fields"} or
        {"type", "error"} for lines.

Field value schema (JSON):

    message            object, one key per field, every field present
    bool               true / false
    integer            JSON integer
    float              JSON number, or "nan", "inf", "-inf"
    string             JSON string (UTF-8 on the wire)
    array / sequence   of messages or strings: JSON list
                       of numbers or bools, any of:
                         [1, 2, 3]
                         {"pattern": "(i*A+B)%M", "len": N}   element i is
                             ((i*A + B) mod 2^64) mod M, truncated to the element type
                             ("+B" and "%M" are optional; "i*A%M" needs no parentheses)
                         {"hex": "0102..."}  the elements' little-endian bytes

    Decoding prints number arrays of more than 64 elements as {"hex": ...}, others
    as lists. An empty ROS 2 message's implicit `structure_needs_at_least_one_member`
    byte is left out of "fields" (and is 0 when absent on encode).

Exit status 3 means rosbags (or numpy) is missing.
"""

from __future__ import annotations

import json
import math
import re
import sys

try:
    import numpy as np
    from rosbags.interfaces import Nodetype
    from rosbags.typesys import Stores, get_typestore, get_types_from_msg
except ImportError as exc:  # pragma: no cover - reported by the Rust test
    sys.stderr.write(f'cannot import rosbags or numpy ({exc}); install them with: pip install rosbags\n')
    sys.exit(3)

STORE = Stores.ROS2_HUMBLE
DUMMY = 'structure_needs_at_least_one_member'
HEX_OVER = 64

# Types rosbags does not ship, as .msg text. Keep in sync with the message! declarations
# in ../ros2_cdr.rs (and with freight's msgs/tensor_msgs.rs for ExperimentalTensor).
USER_MSGS = {
    'tensor_msgs/msg/ExperimentalTensor': """
uint8 dtype_code
uint8 dtype_bits
uint16 dtype_lanes
int64[] shape
int64[] strides
uint64 byte_offset
uint8[] data
""",
    'freight_test_msgs/msg/Inner': """
bool flag
string label
float64 weight
""",
    'freight_test_msgs/msg/Wide': """
float64 scale
uint8 tag
""",
    'freight_test_msgs/msg/Everything': """
std_msgs/Header header
bool flag
int64 int64_value
int8 int8_value
int32 int32_value
uint8 uint8_value
uint64 uint64_value
int16 int16_value
float64 float64_value
uint16 uint16_value
float32 float32_value
uint32 uint32_value
uint8[3] rgb
float64[9] covariance
string[] names
freight_test_msgs/Inner inner
freight_test_msgs/Inner[] inners
builtin_interfaces/Time[2] stamps
uint8 odd
freight_test_msgs/Wide wide
uint8[] bytes
uint16[] shorts
uint32[] words
float32[] floats
float64[] doubles
bool[] flags
int64[] longs
bool done
""",
}

DTYPES = {
    'bool': np.bool_,
    'int8': np.int8,
    'uint8': np.uint8,
    'int16': np.int16,
    'uint16': np.uint16,
    'int32': np.int32,
    'uint32': np.uint32,
    'int64': np.int64,
    'uint64': np.uint64,
    'float32': np.float32,
    'float64': np.float64,
}
FLOATS = {'float32', 'float64'}
PATTERN = re.compile(r'^(?:\(i\*(\d+)(?:\+(\d+))?\)|i\*(\d+))(?:%(\d+))?$')


def make_typestore():
    store = get_typestore(STORE)
    types = {}
    for name, text in USER_MSGS.items():
        types.update(get_types_from_msg(text, name))
    store.register(types)
    return store


# ---------------------------------------------------------------- JSON -> rosbags


def scalar_in(base, value):
    if base == 'string':
        if not isinstance(value, str):
            raise ValueError(f'expected a string, got {value!r}')
        return value
    if base == 'bool':
        if not isinstance(value, bool):
            raise ValueError(f'expected a bool, got {value!r}')
        return value
    if base in FLOATS:
        if isinstance(value, str):
            return float(value)  # "nan", "inf", "-inf"
        return float(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f'expected an integer, got {value!r}')
    return value


def pattern_array(spec, dtype):
    m = PATTERN.match(spec['pattern'].replace(' ', ''))
    if not m:
        raise ValueError(f'bad pattern {spec["pattern"]!r}')
    mul = int(m.group(1) or m.group(3))
    add = int(m.group(2) or 0)
    idx = np.arange(spec['len'], dtype=np.uint64)
    vals = idx * np.uint64(mul) + np.uint64(add)  # wraps mod 2^64
    if m.group(4):
        vals = vals % np.uint64(int(m.group(4)))
    return vals.astype(dtype)  # truncates to the element width


def numbers_in(base, spec):
    dtype = DTYPES[base]
    if isinstance(spec, list):
        return np.array([scalar_in(base, v) for v in spec], dtype=dtype)
    if 'pattern' in spec:
        if base in FLOATS or base == 'bool':
            raise ValueError('patterns are for integer arrays')
        return pattern_array(spec, dtype)
    if 'hex' in spec:
        return np.frombuffer(bytes.fromhex(spec['hex']), dtype=np.dtype(dtype).newbyteorder('<')).astype(dtype)
    raise ValueError(f'bad number array {spec!r}')


def value_in(store, desc, value):
    kind = desc[0]
    if kind == Nodetype.NAME:
        return message_in(store, desc[1], value)
    if kind == Nodetype.BASE:
        return scalar_in(desc[1][0], value)
    sub = desc[1][0]
    if sub[0] == Nodetype.BASE and sub[1][0] != 'string':
        arr = numbers_in(sub[1][0], value)
    else:
        arr = [value_in(store, sub, v) for v in value]
    if kind == Nodetype.ARRAY and len(arr) != desc[1][1]:
        raise ValueError(f'array needs {desc[1][1]} elements, got {len(arr)}')
    return arr


def message_in(store, typename, obj):
    _, fields = store.fielddefs[typename]
    names = [f[0] for f in fields]
    extra = set(obj) - set(names)
    if extra:
        raise ValueError(f'{typename}: unknown fields {sorted(extra)}')
    kwargs = {}
    for name, desc in fields:
        if name not in obj:
            if name == DUMMY and len(fields) == 1:
                kwargs[name] = 0
                continue
            raise ValueError(f'{typename}: field {name!r} missing')
        kwargs[name] = value_in(store, desc, obj[name])
    return store.types[typename](**kwargs)


# ---------------------------------------------------------------- rosbags -> JSON


def number_out(v):
    if isinstance(v, float) and not math.isfinite(v):
        return 'nan' if math.isnan(v) else ('inf' if v > 0 else '-inf')
    return v


def value_out(store, desc, value):
    kind = desc[0]
    if kind == Nodetype.NAME:
        return message_out(store, desc[1], value)
    if kind == Nodetype.BASE:
        return number_out(value) if desc[1][0] != 'string' else value
    sub = desc[1][0]
    if sub[0] == Nodetype.BASE and sub[1][0] != 'string':
        arr = np.asarray(value)
        if len(arr) > HEX_OVER and sub[1][0] != 'bool':
            return {'hex': arr.astype(arr.dtype.newbyteorder('<')).tobytes().hex()}
        return [number_out(v) for v in arr.tolist()]
    return [value_out(store, sub, v) for v in value]


def message_out(store, typename, msg):
    _, fields = store.fielddefs[typename]
    if len(fields) == 1 and fields[0][0] == DUMMY:
        return {}
    return {name: value_out(store, desc, getattr(msg, name)) for name, desc in fields}


# ---------------------------------------------------------------- cases


def time(sec, nanosec):
    return {'sec': sec, 'nanosec': nanosec}


def header(frame_id, sec=1700000000, nanosec=123456789):
    return {'stamp': time(sec, nanosec), 'frame_id': frame_id}


def layout(dims, data_offset=0):
    return {'dim': [{'label': l, 'size': s, 'stride': st} for l, s, st in dims], 'data_offset': data_offset}


def point_field(name, offset, datatype, count=1):
    return {'name': name, 'offset': offset, 'datatype': datatype, 'count': count}


def image(frame, height, width, encoding, step, data, is_bigendian=0):
    return {
        'header': header(frame),
        'height': height,
        'width': width,
        'encoding': encoding,
        'is_bigendian': is_bigendian,
        'step': step,
        'data': data,
    }


XYZI = [point_field('x', 0, 7), point_field('y', 4, 7), point_field('z', 8, 7), point_field('intensity', 12, 7)]


def cloud(frame, width, fields, point_step, data, height=1, is_dense=True):
    return {
        'header': header(frame),
        'height': height,
        'width': width,
        'fields': fields,
        'is_bigendian': False,
        'point_step': point_step,
        'row_step': point_step * width,
        'data': data,
        'is_dense': is_dense,
    }


def tensor(code, bits, lanes, shape, strides, byte_offset, data):
    return {
        'dtype_code': code,
        'dtype_bits': bits,
        'dtype_lanes': lanes,
        'shape': shape,
        'strides': strides,
        'byte_offset': byte_offset,
        'data': data,
    }


def inner(flag, label, weight):
    return {'flag': flag, 'label': label, 'weight': weight}


def everything(**over):
    """A freight_test_msgs/msg/Everything with ordinary values, some overridden."""
    fields = {
        'header': header('base_link'),
        'flag': True,
        'int64_value': -1234567890123,
        'int8_value': -7,
        'int32_value': -100000,
        'uint8_value': 200,
        'uint64_value': 9876543210987,
        'int16_value': -300,
        'float64_value': 3.141592653589793,
        'uint16_value': 65000,
        'float32_value': 0.1,
        'uint32_value': 4000000000,
        'rgb': [255, 128, 0],
        'covariance': [1.0, 0.0, 0.0, 0.0, 2.5, 0.0, 0.0, 0.0, -0.125],
        'names': ['left', 'right', 'up'],
        'inner': inner(True, 'abc', 1.5),
        'inners': [inner(False, 'x', -2.0), inner(True, 'yz', 0.25), inner(True, '', 1e-300)],
        'stamps': [time(1, 2), time(-3, 4)],
        'odd': 9,
        'wide': {'scale': 2.0, 'tag': 5},
        'bytes': [1, 2, 3, 4, 5],
        'shorts': [1, 65535, 3],
        'words': [7, 4294967295],
        'floats': [1.5, -2.25, 0.1],
        'doubles': [1e100, -0.5],
        'flags': [True, False, True],
        'longs': [-1, 2**62, -(2**63)],
        'done': True,
    }
    unknown = set(over) - set(fields)
    assert not unknown, unknown
    fields.update(over)
    return fields


def odd(n):
    """Sequences of n elements each, so every following field starts misaligned."""
    return everything(
        names=['a' * i for i in range(n)],
        inners=[inner(i % 2 == 0, 'q' * i, float(i)) for i in range(n)],
        bytes={'pattern': 'i*7%256', 'len': n},
        shorts={'pattern': '(i*4099+1)%65536', 'len': n},
        words={'pattern': 'i*2654435761%4294967296', 'len': n},
        floats=[float(i) + 0.5 for i in range(n)],
        doubles=[float(-i) - 0.25 for i in range(n)],
        flags=[i % 3 == 0 for i in range(n)],
        longs={'pattern': 'i*11400714819323198485', 'len': n},
    )


def empty_everything():
    return everything(
        header=header('', 0, 0),
        flag=False,
        int64_value=0,
        int8_value=0,
        int32_value=0,
        uint8_value=0,
        uint64_value=0,
        int16_value=0,
        float64_value=0.0,
        uint16_value=0,
        float32_value=0.0,
        uint32_value=0,
        rgb=[0, 0, 0],
        covariance=[0.0] * 9,
        names=[],
        inner=inner(False, '', 0.0),
        inners=[],
        stamps=[time(0, 0), time(0, 0)],
        odd=0,
        wide={'scale': 0.0, 'tag': 0},
        bytes=[],
        shorts=[],
        words=[],
        floats=[],
        doubles=[],
        flags=[],
        longs=[],
        done=False,
    )


def cases():
    c = []

    def add(name, typename, fields):
        c.append((name, typename, fields))

    # builtin_interfaces
    add('time', 'builtin_interfaces/msg/Time', time(1700000000, 123456789))
    add('time_extremes', 'builtin_interfaces/msg/Time', time(-(2**31), 2**32 - 1))
    add('duration', 'builtin_interfaces/msg/Duration', time(-5, 999999999))
    # std_msgs
    add('header', 'std_msgs/msg/Header', header('camera_optical_frame'))
    add('header_empty_frame', 'std_msgs/msg/Header', header('', 0, 0))
    add('header_umlaut', 'std_msgs/msg/Header', header('kamera-\u00fc'))
    add('header_japanese', 'std_msgs/msg/Header', header('\u65e5\u672c'))
    add('header_emoji', 'std_msgs/msg/Header', header('\U0001f680robot'))
    add('multi_array_dimension', 'std_msgs/msg/MultiArrayDimension', {'label': 'height', 'size': 480, 'stride': 921600})
    add('multi_array_layout', 'std_msgs/msg/MultiArrayLayout',
        layout([('height', 480, 921600), ('width', 640, 1920), ('channel', 3, 3)], 7))
    add('multi_array_layout_empty', 'std_msgs/msg/MultiArrayLayout', layout([]))
    add('uint8_multi_array', 'std_msgs/msg/UInt8MultiArray',
        {'layout': layout([('x', 7, 7)]), 'data': {'pattern': 'i*7%256', 'len': 7}})
    add('uint8_multi_array_empty', 'std_msgs/msg/UInt8MultiArray', {'layout': layout([]), 'data': []})
    add('uint64_multi_array', 'std_msgs/msg/UInt64MultiArray',
        {'layout': layout([('\u00fc', 4, 4)], 1), 'data': [0, 1, 2**64 - 1, 2**63]})
    add('uint64_multi_array_no_dims', 'std_msgs/msg/UInt64MultiArray', {'layout': layout([]), 'data': [5]})
    add('uint64_multi_array_empty_data', 'std_msgs/msg/UInt64MultiArray',
        {'layout': layout([('a', 0, 0), ('bcd', 0, 0)]), 'data': []})
    add('uint64_multi_array_odd_label', 'std_msgs/msg/UInt64MultiArray',
        {'layout': layout([('abc', 3, 1)], 0), 'data': {'pattern': 'i*11400714819323198485', 'len': 3}})
    # sensor_msgs
    add('image_rgb8', 'sensor_msgs/msg/Image', image('camera', 2, 4, 'rgb8', 12, {'pattern': 'i*7%256', 'len': 24}))
    add('image_empty', 'sensor_msgs/msg/Image', image('', 0, 0, '', 0, []))
    add('image_odd_sizes', 'sensor_msgs/msg/Image', image('\u65e5\u672c', 1, 3, 'mono8', 3, [1, 2, 3], 1))
    add('image_emoji_encoding', 'sensor_msgs/msg/Image', image('x', 1, 1, '\U0001f4f7', 1, [255]))
    add('point_field', 'sensor_msgs/msg/PointField', point_field('intensity', 12, 7))
    add('point_field_umlaut', 'sensor_msgs/msg/PointField', point_field('\u00fc', 3, 2, 3))
    add('point_cloud2', 'sensor_msgs/msg/PointCloud2',
        cloud('lidar', 3, XYZI, 16, {'pattern': '(i*13+5)%251', 'len': 48}))
    add('point_cloud2_empty', 'sensor_msgs/msg/PointCloud2', cloud('', 0, [], 0, [], height=0, is_dense=False))
    add('point_cloud2_odd', 'sensor_msgs/msg/PointCloud2',
        cloud('l', 1, [point_field('i', 0, 2)], 1, [42], is_dense=False))
    # tensor_msgs
    add('tensor_float32', 'tensor_msgs/msg/ExperimentalTensor',
        tensor(2, 32, 1, [2, 3], [3, 1], 0, {'hex': np.arange(6, dtype='<f4').tobytes().hex()}))
    add('tensor_scalar', 'tensor_msgs/msg/ExperimentalTensor', tensor(0, 8, 1, [], [], 0, [42]))
    add('tensor_empty', 'tensor_msgs/msg/ExperimentalTensor', tensor(0, 0, 0, [], [], 0, []))
    add('tensor_odd_offset', 'tensor_msgs/msg/ExperimentalTensor',
        tensor(1, 8, 1, [7], [], 2**40, {'pattern': 'i*3%256', 'len': 7}))
    # a user message with every kind of field
    add('everything', 'freight_test_msgs/msg/Everything', everything())
    add('everything_empty', 'freight_test_msgs/msg/Everything', empty_everything())
    for n in (1, 3, 7):
        add(f'everything_odd_{n}', 'freight_test_msgs/msg/Everything', odd(n))
    add('everything_non_ascii', 'freight_test_msgs/msg/Everything', everything(
        header=header('\u00fc'),
        names=['\u00fc', '\u65e5\u672c', '\U0001f680', '', 'caf\u00e9 \u2615'],
        inner=inner(False, '\u65e5\u672c\u8a9e', -1.0),
        inners=[inner(True, '\U0001f916', 2.0)],
    ))
    add('everything_extremes', 'freight_test_msgs/msg/Everything', everything(
        int64_value=-(2**63),
        int8_value=-128,
        int32_value=-(2**31),
        uint8_value=255,
        uint64_value=2**64 - 1,
        int16_value=-(2**15),
        float64_value=-0.0,
        uint16_value=2**16 - 1,
        float32_value='-inf',
        uint32_value=2**32 - 1,
        covariance=[5e-324, -5e-324, 1.7976931348623157e308, 'inf', '-inf', -0.0, 2.2250738585072014e-308, 1.0, 0.0],
        floats=['nan', 'inf', '-inf', -0.0, 3.4028234663852886e38, 1.401298464324817e-45],
        doubles=['nan', 5e-324],
        longs=[2**63 - 1, -(2**63), 0],
        wide={'scale': 'inf', 'tag': 255},
    ))
    # large data (compared byte for byte, too)
    add('image_1080p_rgb8', 'sensor_msgs/msg/Image',
        image('camera', 1080, 1920, 'rgb8', 5760, {'pattern': 'i*7%256', 'len': 1920 * 1080 * 3}))
    add('point_cloud2_100k', 'sensor_msgs/msg/PointCloud2',
        cloud('lidar', 100_000, XYZI, 16, {'pattern': '(i*13+5)%251', 'len': 100_000 * 16}))
    add('uint64_multi_array_100k', 'std_msgs/msg/UInt64MultiArray',
        {'layout': layout([('n', 100_000, 1)]), 'data': {'pattern': 'i*11400714819323198485', 'len': 100_000}})
    # ROS 2 gives an empty .msg a one-byte member `structure_needs_at_least_one_member`
    add('empty_message', 'std_msgs/msg/Empty', {})
    return c


# ---------------------------------------------------------------- modes


def encode(store):
    out = []
    for name, typename, fields in cases():
        msg = message_in(store, typename, fields)
        cdr = bytes(store.serialize_cdr(msg, typename, little_endian=True))
        out.append({'name': name, 'type': typename, 'fields': fields, 'cdr': cdr.hex()})
    try:
        from importlib.metadata import version

        rosbags_version = version('rosbags')
    except Exception:  # noqa: BLE001
        rosbags_version = 'unknown'
    json.dump({'rosbags': rosbags_version, 'store': STORE.value, 'cases': out}, sys.stdout)
    sys.stdout.write('\n')


def decode_one(store, typename, hexdata):
    msg = store.deserialize_cdr(bytes.fromhex(hexdata), typename)
    return message_out(store, typename, msg)


def decode(store, typename):
    data = sys.stdin.read()
    if typename:
        json.dump({'fields': decode_one(store, typename, data.strip())}, sys.stdout)
    else:
        results = []
        for line in data.splitlines():
            if not line.strip():
                continue
            name, _, hexdata = line.strip().partition(' ')
            try:
                results.append({'type': name, 'fields': decode_one(store, name, hexdata.strip())})
            except Exception as exc:  # noqa: BLE001 - reported per message
                results.append({'type': name, 'error': f'{type(exc).__name__}: {exc}'})
        json.dump(results, sys.stdout)
    sys.stdout.write('\n')


def main(argv):
    if len(argv) >= 2 and argv[1] == 'encode' and len(argv) == 2:
        encode(make_typestore())
    elif len(argv) >= 2 and argv[1] == 'decode' and len(argv) <= 3:
        decode(make_typestore(), argv[2] if len(argv) == 3 else None)
    else:
        sys.stderr.write('usage: vectors.py encode | vectors.py decode [TYPE] < hex\n')
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
