//! The [`ServiceType`] trait: a ROS 2 service's request and response types.

use crate::message::Message;

/// A ROS 2 service type (`std_srvs/srv/SetBool`): the request a client sends
/// and the response a server answers with. Both are ordinary [`Message`]s, so
/// their large fields are [`Buffer`](crate::Buffer)s and travel as any
/// message's do.
///
/// The request and response types are named as ROS 2 names them on the wire
/// (`std_srvs/srv/SetBool_Request`, DDS `std_srvs::srv::dds_::SetBool_Request_`).
///
/// ```
/// use freight_msg::{message, Message, ServiceType};
///
/// message! {
///     /// The two numbers to add.
///     pub struct AddTwoIntsRequest = "example_interfaces/srv/AddTwoInts_Request" { pub a: i64, pub b: i64 }
/// }
/// message! {
///     /// Their sum.
///     pub struct AddTwoIntsResponse = "example_interfaces/srv/AddTwoInts_Response" { pub sum: i64 }
/// }
///
/// /// `example_interfaces/srv/AddTwoInts`.
/// pub struct AddTwoInts;
///
/// impl ServiceType for AddTwoInts {
///     const TYPE_NAME: &'static str = "example_interfaces/srv/AddTwoInts";
///     type Request = AddTwoIntsRequest;
///     type Response = AddTwoIntsResponse;
/// }
///
/// assert_eq!(AddTwoIntsRequest::dds_type_name(), "example_interfaces::srv::dds_::AddTwoInts_Request_");
/// ```
pub trait ServiceType: 'static {
    /// The ROS 2 service type name, `package/srv/Name`.
    const TYPE_NAME: &'static str;
    /// What a client sends.
    type Request: Message;
    /// What a server answers.
    type Response: Message;
}
