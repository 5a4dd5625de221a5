//! JavaScript arguments as Rust values. The binding checks only their JavaScript type (a
//! value of the wrong type is `ERR_INVALID_ARGUMENT`, naming the argument, what it must be and
//! what it is, as Python's `argument 'lease': must be real number, not str`); the core checks
//! their values.

use napi::bindgen_prelude::{BufferSlice, FromNapiValue, Object, Unknown};
use napi::{JsValue, ValueType};

fn invalid(message: String) -> polylock::Error {
    polylock::Error::invalid_argument(message)
}

/// The type of `value` as JavaScript's `typeof` names it (`null` for null).
fn type_name(value: &Unknown) -> &'static str {
    match value.get_type() {
        Ok(ValueType::Undefined) => "undefined",
        Ok(ValueType::Null) => "null",
        Ok(ValueType::Boolean) => "boolean",
        Ok(ValueType::Number) => "number",
        Ok(ValueType::String) => "string",
        Ok(ValueType::Symbol) => "symbol",
        Ok(ValueType::Function) => "function",
        Ok(ValueType::Object | ValueType::External) => "object",
        // The one type left, which napi names only with its `napi6` feature.
        Ok(_) => "bigint",
        Err(_) => "unknown",
    }
}

/// The error of an argument of the wrong JavaScript type.
fn mismatch(what: &str, expected: &str, value: &Unknown) -> polylock::Error {
    invalid(format!(
        "{what} must be {expected}, not {}",
        type_name(value)
    ))
}

fn is(value: &Unknown, expected: ValueType) -> bool {
    value.get_type().is_ok_and(|found| found == expected)
}

/// `undefined` and `null`: an optional argument left out.
fn is_absent(value: &Unknown) -> bool {
    matches!(value.get_type(), Ok(ValueType::Undefined | ValueType::Null))
}

/// `value` as a `T` when its JavaScript type is `expected` (described as `expected_words`).
fn typed<T: FromNapiValue>(
    value: Unknown,
    what: &str,
    expected: ValueType,
    expected_words: &str,
) -> polylock::Result<T> {
    if !is(&value, expected) {
        return Err(mismatch(what, expected_words, &value));
    }
    // SAFETY: the value was checked to be of the JavaScript type that `T` is converted from.
    unsafe { value.cast::<T>() }.map_err(|_| mismatch(what, expected_words, &value))
}

pub(crate) fn string(value: Unknown, what: &str) -> polylock::Result<String> {
    typed(value, what, ValueType::String, "a string")
}

pub(crate) fn number(value: Unknown, what: &str) -> polylock::Result<f64> {
    typed(value, what, ValueType::Number, "a number")
}

/// A JS number as an integer for the core to check, converted as napi converts numbers to
/// i64 (a fraction is truncated, `NaN` and infinities become 0).
pub(crate) fn integer(value: Unknown, what: &str) -> polylock::Result<i64> {
    typed(value, what, ValueType::Number, "a number")
}

pub(crate) fn boolean(value: Unknown, what: &str) -> polylock::Result<bool> {
    typed(value, what, ValueType::Boolean, "a boolean")
}

/// The bytes of a string (UTF-8) or a Buffer/Uint8Array.
pub(crate) fn bytes(value: Unknown, what: &str) -> polylock::Result<Vec<u8>> {
    const EXPECTED: &str = "a string or a Buffer";
    if is(&value, ValueType::String) {
        return string(value, what).map(String::into_bytes);
    }
    if !value.is_buffer().unwrap_or(false) {
        return Err(mismatch(what, EXPECTED, &value));
    }
    // SAFETY: the value was checked to be a Buffer (or Uint8Array).
    unsafe { value.cast::<BufferSlice>() }
        .map(|slice| slice.to_vec())
        .map_err(|_| mismatch(what, EXPECTED, &value))
}

/// An optional argument: `undefined` and `null` are `None`, anything else goes to `convert`.
pub(crate) fn optional<'env, T>(
    value: Option<Unknown<'env>>,
    convert: impl FnOnce(Unknown<'env>) -> polylock::Result<T>,
) -> polylock::Result<Option<T>> {
    value
        .filter(|value| !is_absent(value))
        .map(convert)
        .transpose()
}

/// An optional options object (`undefined` and `null`: every option left out), read field by
/// field with the converters above.
pub(crate) struct Fields<'env>(Option<Object<'env>>);

impl<'env> Fields<'env> {
    pub(crate) fn of(value: Option<Unknown<'env>>, what: &str) -> polylock::Result<Self> {
        let object = optional(value, |value| {
            typed(value, what, ValueType::Object, "an object")
        })?;
        Ok(Fields(object))
    }

    /// The field `name` (its JavaScript name, which messages use); `undefined` and `null` are
    /// `None`.
    pub(crate) fn get<T>(
        &self,
        name: &str,
        convert: impl FnOnce(Unknown<'env>, &str) -> polylock::Result<T>,
    ) -> polylock::Result<Option<T>> {
        let Some(object) = &self.0 else {
            return Ok(None);
        };
        let field = object
            .get::<Unknown>(name)
            .map_err(|err| invalid(format!("{name} could not be read: {}", err.reason)))?;
        optional(field, |value| convert(value, name))
    }
}
