package catalog

// DecodeEvent exposes decodeEvent to the differential test against encoding/json.
var DecodeEvent = decodeEvent
