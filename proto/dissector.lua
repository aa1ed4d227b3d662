-- The dissector's logic, over the `spec` table that proto/gen.py generates from proto/ina.toml
-- above this text in build/gen/ina.lua (this file alone does not run). Every number, name and
-- meaning comes from `spec`; what is here is how Wireshark shows them (docs/dissector.md).
--
-- Written for the Lua 5.2 of Debian 12's Wireshark 4.0 (no bitwise operators: bit32, or
-- Wireshark's own `bit` where a later Lua has no bit32).

local bitops = bit32 or bit
local band, bxor, rshift = bitops.band, bitops.bxor, bitops.rshift

-- ---- CRC32C, the trailer's CRC ([crc]; proto/src/crc32c.cc) ------------------------------------
-- Reflected, table-driven: reg = T[(reg ~ b) & 0xFF] ~ (reg >> 8) from init, then ~xorout.
local crc_table = {}
for i = 0, 255 do
  local c = i
  for _ = 1, 8 do
    if c % 2 == 1 then c = bxor(rshift(c, 1), spec.crc.poly_reflected) else c = rshift(c, 1) end
  end
  crc_table[i] = c
end

-- The CRC32C of a ByteArray, as a number in 0 .. 2^32-1.
local function crc32c(bytes)
  local reg = spec.crc.init
  for i = 0, bytes:len() - 1 do
    reg = bxor(crc_table[band(bxor(reg, bytes:get_index(i)), 0xFF)], rshift(reg, 8))
  end
  return bxor(reg, spec.crc.xorout) % 0x100000000
end

if crc32c(ByteArray.new("313233343536373839")) ~= spec.crc.check then
  error("ina.lua: CRC32C of \"123456789\" is not spec.crc.check")
end

-- ---- Fields ------------------------------------------------------------------------------------
local ina = Proto("ina", "ina in-network aggregation")

local enums = { msg_type = spec.msg_types, error_code = spec.error_codes,
                join_param = spec.join_params }
local uint_field = { [1] = ProtoField.uint8, [2] = ProtoField.uint16, [4] = ProtoField.uint32 }

-- "next_exp" -> "Next exp"
local function label(name)
  local s = name:gsub("_", " ")
  return s:sub(1, 1):upper() .. s:sub(2)
end

local function new_field(abbrev, name, bytes, enum, doc, display)
  return uint_field[bytes](abbrev, label(name), display or base.DEC, enum and enums[enum], nil, doc)
end

local hf = {}        -- header field name -> ProtoField (ina.<field>)
local fields_by_name = {}
for _, f in ipairs(spec.fields) do
  f.display = f.name == "flags" and base.HEX or base.DEC
  hf[f.name] = new_field("ina." .. f.name, f.name, f.bytes, f.enum, f.doc, f.display)
  fields_by_name[f.name] = f
end

local hf_flag = {}   -- flag bit fields under ina.flags
for _, fl in ipairs(spec.flags) do
  hf_flag[#hf_flag + 1] = ProtoField.bool("ina.flags." .. fl.name, fl.name, 8, nil, fl.mask,
                                          fl.doc)
end

-- Per-type views: for message type t, view_fields[t][field name] = ProtoField ina.<type>.<name>.
-- Error messages also take their error code's views (ina.error.<name>; codes share these, and
-- gen.py checks that one name there is one field, enum and doc: one ProtoField each).
local view_by_abbrev = {}
local function view_table(views, prefix)
  local out = {}
  for key, list in pairs(views) do
    out[key] = {}
    for _, v in ipairs(list) do
      local abbrev = prefix(key) .. "." .. v.name
      if not view_by_abbrev[abbrev] then
        local bytes = fields_by_name[v.field].bytes
        view_by_abbrev[abbrev] = new_field(abbrev, v.name, bytes, v.enum, v.doc)
      end
      out[key][v.field] = view_by_abbrev[abbrev]
    end
  end
  return out
end
local view_fields = view_table(spec.views, function(t) return "ina." .. spec.msg_types[t] end)
local error_view_fields = view_table(spec.error_views, function() return "ina.error" end)

local hf_payload = ProtoField.bytes("ina.payload", "Payload", base.NONE,
                                    "The message's int32 elements, big-endian")
local hf_value = ProtoField.int32("ina.value", "Value", base.DEC, nil, nil, "One payload element")
local hf_crc = ProtoField.uint32("ina.crc", "CRC32C", base.HEX, nil, nil, spec.crc.doc)
local hf_crc_computed = ProtoField.uint32("ina.crc.computed", "Computed CRC32C", base.HEX, nil,
                                          nil, "CRC32C of every message byte before the trailer")
local hf_crc_status = ProtoField.string("ina.crc.status", "CRC32C status", nil,
                                        "good: the trailer matches the message; bad: it does not")
local hf_pad = ProtoField.bytes("ina.pad", "Pad", base.NONE, "RoCEv2 pad to 4 bytes (BTH PadCnt)")
local hf_partial = ProtoField.bytes("ina.partial", "Partial element", base.NONE,
                                    "Payload bytes short of a whole int32 (a malformed message)")

local all = { hf_payload, hf_value, hf_crc, hf_crc_computed, hf_crc_status, hf_pad, hf_partial }
for _, f in ipairs(spec.fields) do all[#all + 1] = hf[f.name] end
for _, f in ipairs(hf_flag) do all[#all + 1] = f end
for _, f in pairs(view_by_abbrev) do all[#all + 1] = f end
ina.fields = all

local ef_bad_crc = ProtoExpert.new("ina.crc.bad", "CRC32C trailer does not match the message",
                                   expert.group.CHECKSUM, expert.severity.WARN)
local ef_version = ProtoExpert.new("ina.version.other", "Not this protocol version",
                                   expert.group.PROTOCOL, expert.severity.NOTE)
local ef_type = ProtoExpert.new("ina.type.unknown", "Unknown message type",
                                expert.group.MALFORMED, expert.severity.WARN)
local ef_length = ProtoExpert.new("ina.length.bad",
                                  "Message length does not match its type and count",
                                  expert.group.MALFORMED, expert.severity.WARN)
local ef_short = ProtoExpert.new("ina.short", "Shorter than the ina header",
                                 expert.group.MALFORMED, expert.severity.ERROR)
ina.experts = { ef_bad_crc, ef_version, ef_type, ef_length, ef_short }

-- ---- Preferences -------------------------------------------------------------------------------
ina.prefs.udp_ports = Pref.range("UDP ports", tostring(spec.udp_port),
                                 "UDP ports decoded as ina (the switch's --port; ina-switchd's " ..
                                 "default is " .. spec.udp_port .. "). On other ports the " ..
                                 "heuristic finds ina messages by version, type, length and " ..
                                 "CRC32C trailer.", 65535)

-- ---- Dissection --------------------------------------------------------------------------------
-- The trailer: ok = nil (no trailer: version 1), true or false.
local function trailer(tvb, len)
  if len < spec.header_bytes + spec.crc_bytes then return nil end
  local covered = len - spec.crc_bytes
  local stored = tvb(covered, spec.crc_bytes):le_uint()
  local computed = crc32c(tvb(0, covered):bytes())
  return stored == computed, stored, computed
end

-- The length of a message of this version (1 had no trailer), type and count.
local function expected_length(version, mtype, count)
  local n = spec.header_bytes
  if spec.payload_types[mtype] then n = n + count * spec.elem_bytes end
  if version ~= 1 then n = n + spec.crc_bytes end
  return n
end

-- A header field's value, by name.
local function get(tvb, name)
  local f = fields_by_name[name]
  return tvb(f.offset, f.bytes):uint()
end

-- Dissects one ina message, the first `len` bytes of tvb (what follows is pad: `pad` bytes).
local function dissect_message(tvb, pinfo, tree, len, pad, append_info)
  pinfo.cols.protocol = "ina"
  local root = tree:add(ina, tvb(0, len + pad))
  if len < spec.header_bytes then
    root:add_proto_expert_info(ef_short)
    pinfo.cols.info = string.format("%d bytes, short of the %d-byte ina header", len,
                                    spec.header_bytes)
    return
  end
  local version = get(tvb, "version")
  local mtype = get(tvb, "type")
  local code = mtype == spec.error_type and get(tvb, "aux") or nil
  local tname = spec.msg_types[mtype] or ("type " .. mtype)
  local views = view_fields[mtype] or {}
  local error_views = code and error_view_fields[code] or {}

  for _, f in ipairs(spec.fields) do
    local range = tvb(f.offset, f.bytes)
    local view = error_views[f.name] or views[f.name]
    local item
    if view then
      -- Shown by its meaning in this message type; the general field beneath it, for filters.
      item = root:add(view, range)
      item:append_text(" (" .. f.name .. ")")
      item:add(hf[f.name], range)
    else
      item = root:add(hf[f.name], range)
    end
    if f.name == "version" and version ~= spec.version then
      item:add_proto_expert_info(ef_version, "Version " .. version .. "; this dissector's is " ..
                                 spec.version .. (version == 1 and " (no CRC32C trailer)" or ""))
    elseif f.name == "type" and not spec.msg_types[mtype] then
      item:add_proto_expert_info(ef_type)
    elseif f.name == "flags" then
      for _, flag in ipairs(hf_flag) do item:add(flag, range) end
    elseif (f.name == "exp" or f.name == "next_exp") and not view then
      local e = range:uint()
      item:append_text(e == 0 and " (no block)" or string.format(" (E = %d)", e - spec.exp_bias))
    end
  end

  -- Payload: whatever lies between the header and the trailer, as int32 values.
  local has_trailer = version ~= 1
  local body_end = has_trailer and len - spec.crc_bytes or len
  local count = get(tvb, "count")
  local n = math.floor((body_end - spec.header_bytes) / spec.elem_bytes)
  if n > 0 then
    local p = root:add(hf_payload, tvb(spec.header_bytes, n * spec.elem_bytes))
    p:set_text(string.format("Payload: %d int32 value%s", n, n == 1 and "" or "s"))
    for i = 0, n - 1 do p:add(hf_value, tvb(spec.header_bytes + i * spec.elem_bytes, 4)) end
  end
  local partial_at = spec.header_bytes + math.max(n, 0) * spec.elem_bytes
  if body_end > partial_at then root:add(hf_partial, tvb(partial_at, body_end - partial_at)) end
  local want = expected_length(version, mtype, count)
  if len ~= want then
    root:add_proto_expert_info(ef_length, string.format(
        "%d bytes; %s with count %d has %d (a fabric drops it as malformed)", len, tname, count,
        want))
  end

  local info = string.format("%s job=%d rank=%d", tname, get(tvb, "job"), get(tvb, "rank"))
  if spec.payload_types[mtype] then
    info = info .. string.format(" slot=%d gen=%d count=%d offset=%d", get(tvb, "slot"),
                                 get(tvb, "gen"), count, get(tvb, "offset"))
  elseif code then
    info = info .. " " .. (spec.error_codes[code] or ("code " .. code))
  end

  local ok, stored, computed = nil, nil, nil
  if has_trailer then ok, stored, computed = trailer(tvb, len) end
  if ok ~= nil then
    local range = tvb(len - spec.crc_bytes, spec.crc_bytes)
    local item = root:add_le(hf_crc, range)
    item:append_text(ok and " [good]" or " [bad]")
    item:add(hf_crc_status, range, ok and "good" or "bad"):set_generated()
    item:add(hf_crc_computed, range, computed):set_generated()
    if not ok then
      item:add_proto_expert_info(ef_bad_crc, string.format(
          "CRC32C trailer 0x%08x, the message's CRC32C is 0x%08x", stored, computed))
      info = info .. " [bad CRC32C]"
    end
  end
  if pad > 0 then root:add(hf_pad, tvb(len, pad)) end

  root:append_text(", " .. info)
  if append_info then
    pinfo.cols.info:append(" | ina " .. info)
  else
    pinfo.cols.info = info
  end
end

-- The protocol's own dissector (UDP ports from the preference, Decode As): any version, and a
-- message that fails its checks is still shown, with what is wrong.
function ina.dissector(tvb, pinfo, tree)
  local len = tvb:len()
  dissect_message(tvb, pinfo, tree, len, 0, false)
  return len
end

-- Is tvb's start one ina message of `len` bytes (versions: those accepted)? What the heuristics
-- ask: a known version and type, then (version 2) a good trailer, whose 2^-32 chance by accident
-- is evidence enough to show a message whose length does not match its count (with a warning);
-- version 1 had no trailer, so there the length must match.
local function looks_like_ina(tvb, len, versions)
  if len < spec.header_bytes then return false end
  local version = get(tvb, "version")
  local mtype = get(tvb, "type")
  if not versions[version] or not spec.msg_types[mtype] then return false end
  if version == 1 then return len == expected_length(version, mtype, get(tvb, "count")) end
  return (trailer(tvb, len))
end

local only_this_version = { [spec.version] = true }

-- Heuristic on UDP: a capture from any port (a testbed's switch on another --port).
local function heur_udp(tvb, pinfo, tree)
  if not looks_like_ina(tvb, tvb:len(), only_this_version) then return false end
  ina.dissector(tvb, pinfo, tree)
  return true
end

-- RoCEv2: the ina message is the payload of a UD SEND (BTH + DETH, then the message, then pad to
-- 4 bytes; docs/rdma.md). Wireshark's infiniband dissector hands the payload (without ICRC) to its
-- "infiniband.payload" heuristics; the BTH pad count says where the message ends. Version 1
-- messages (no trailer) are accepted here too: rxe captures predate version 2.
-- (A Wireshark built without the infiniband dissector gets the UDP dissector only.)
local have_infiniband, bth_padcnt = pcall(Field.new, "infiniband.bth.padcnt")
local roce_versions = { [1] = true, [spec.version] = true }

local function heur_roce(tvb, pinfo, tree)
  local pad = bth_padcnt()
  pad = pad and pad.value or 0
  local len = tvb:len() - pad
  if len < 0 or not looks_like_ina(tvb, len, roce_versions) then return false end
  dissect_message(tvb, pinfo, tree, len, pad, true)
  return true
end

local udp_table = DissectorTable.get("udp.port")
local registered_ports = ""

local function register_ports()
  if registered_ports ~= "" then udp_table:remove(registered_ports, ina) end
  registered_ports = tostring(ina.prefs.udp_ports)
  if registered_ports ~= "" then udp_table:add(registered_ports, ina) end
end

function ina.prefs_changed() register_ports() end

register_ports()
ina:register_heuristic("udp", heur_udp)
if have_infiniband then ina:register_heuristic("infiniband.payload", heur_roce) end
