//! The declaration of every option of [`BatchSpec`]: its name, type, default and summary, in
//! [`BatchSpec::OPTIONS`], and its value by name ([`BatchSpec::option`],
//! [`BatchSpec::set_option`]).
//!
//! The fields of [`BatchSpec`] are declared once, by the `batch_spec!` macro invocation in
//! `spec/mod.rs`: it writes the struct with each field's documentation, its `Default` and this
//! table, so that a binding (the Python package) takes every option by name, converts it by its
//! [`OptionType`], and lists the options with their defaults without naming any of them.

use std::fmt;

use super::{BatchSpec, ColumnGroup, NullToNan};
use crate::Error;
use crate::images::ImageColumn;
use crate::sequences::Sequence;
use crate::state::LoaderState;

/// The type of an option's value, which says how a binding converts a value of its own language
/// into the field's Rust type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OptionType {
    /// A flag: `bool`.
    Bool,
    /// Where nulls become NaN: [`NullToNan`], from a flag or a list of column names.
    NullToNan,
    /// A count or a size: `usize`, from a non-negative integer.
    Usize,
    /// A count of at least 1: `usize`, from a positive integer (a batch size, a depth).
    Count,
    /// An optional count: `Option<usize>`.
    OptionalUsize,
    /// A non-negative 64-bit integer: `u64`.
    U64,
    /// A seed: `u64`, from any integer taken modulo 2^64 (so that `-1` is `u64::MAX`).
    Seed,
    /// The single columns: `Option<Vec<String>>`, `None` for every column not in a group.
    Columns,
    /// Column names: `Vec<String>`.
    Names,
    /// Column groups: `Vec<ColumnGroup>`.
    Groups,
    /// Sequence columns: `Vec<Sequence>`.
    Sequences,
    /// A saved position: `Option<LoaderState>`.
    State,
    /// Image columns: `Vec<ImageColumn>`.
    Images,
    /// An optional text (a directory, a prefix): `Option<String>`.
    OptionalText,
}

/// What an option is about: what each batch holds, or how the stream is cut, ordered, sharded
/// and read.
///
/// [`collate`](crate::collate) makes one batch of rows that its caller has already cut, so only
/// [`OptionScope::Batch`] options apply to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionScope {
    /// What each batch holds: its columns, groups, masks, sequences, null handling and layout.
    Batch,
    /// How the source is cut into batches, ordered, sharded, read and resumed.
    Stream,
}

/// The value of one option, as [`BatchSpec::option`] gives it and [`BatchSpec::set_option`]
/// takes it: one variant per Rust type of the fields.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OptionValue {
    /// A `bool` field.
    Bool(bool),
    /// [`BatchSpec::null_to_nan`].
    NullToNan(NullToNan),
    /// A `usize` field.
    Usize(usize),
    /// An `Option<usize>` field.
    OptionalUsize(Option<usize>),
    /// A `u64` field (of type [`OptionType::U64`] or [`OptionType::Seed`]).
    U64(u64),
    /// [`BatchSpec::columns`].
    Columns(Option<Vec<String>>),
    /// A list of column names.
    Names(Vec<String>),
    /// [`BatchSpec::groups`].
    Groups(Vec<ColumnGroup>),
    /// [`BatchSpec::sequences`].
    Sequences(Vec<Sequence>),
    /// [`BatchSpec::state`] (boxed: a state holds the epoch's work).
    State(Option<Box<LoaderState>>),
    /// [`BatchSpec::images`].
    Images(Vec<ImageColumn>),
    /// An `Option<String>` field.
    OptionalText(Option<String>),
}

/// One option of [`BatchSpec`], as declared: see [`BatchSpec::OPTIONS`].
#[derive(Clone, Copy)]
pub struct OptionDecl {
    /// The field's name, which is also the option's keyword in the Python binding.
    pub name: &'static str,
    /// How a value is given.
    pub option_type: OptionType,
    /// What the option is about.
    pub scope: OptionScope,
    /// The first line of the field's documentation, a sentence.
    pub summary: &'static str,
    /// The default as written in the declaration (Rust source).
    pub default_source: &'static str,
    pub(super) default: fn() -> OptionValue,
}

impl OptionDecl {
    /// The option's default value, the same as the field's in [`BatchSpec::default`].
    pub fn default_value(&self) -> OptionValue {
        (self.default)()
    }

    /// The option of this name, if there is one.
    pub fn find(name: &str) -> Option<&'static OptionDecl> {
        BatchSpec::OPTIONS.iter().find(|option| option.name == name)
    }
}

impl fmt::Debug for OptionDecl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OptionDecl")
            .field("name", &self.name)
            .field("option_type", &self.option_type)
            .field("scope", &self.scope)
            .field("summary", &self.summary)
            .field("default", &self.default_value())
            .finish()
    }
}

/// A Rust type of a field of [`BatchSpec`], to and from its [`OptionValue`].
pub(super) trait OptionField: Sized {
    /// The value of this field.
    fn into_value(self) -> OptionValue;
    /// The field from `value`, or `None` when `value` is of another variant.
    fn from_value(value: OptionValue) -> Option<Self>;
}

/// Implements [`OptionField`] for a Rust type held by one variant of [`OptionValue`].
macro_rules! option_field {
    ($($ty:ty => $variant:ident),* $(,)?) => {
        $(
            impl OptionField for $ty {
                fn into_value(self) -> OptionValue {
                    OptionValue::$variant(self)
                }

                fn from_value(value: OptionValue) -> Option<Self> {
                    match value {
                        OptionValue::$variant(inner) => Some(inner),
                        _ => None,
                    }
                }
            }
        )*
    };
}

option_field!(
    bool => Bool,
    NullToNan => NullToNan,
    usize => Usize,
    Option<usize> => OptionalUsize,
    u64 => U64,
    Option<Vec<String>> => Columns,
    Vec<String> => Names,
    Vec<ColumnGroup> => Groups,
    Vec<Sequence> => Sequences,
    Vec<ImageColumn> => Images,
    Option<String> => OptionalText,
);

impl OptionField for Option<LoaderState> {
    fn into_value(self) -> OptionValue {
        OptionValue::State(self.map(Box::new))
    }

    fn from_value(value: OptionValue) -> Option<Self> {
        match value {
            OptionValue::State(state) => Some(state.map(|state| *state)),
            _ => None,
        }
    }
}

impl OptionType {
    /// Whether `value` is of the variant that options of this type hold.
    pub fn holds(self, value: &OptionValue) -> bool {
        matches!(
            (self, value),
            (OptionType::Bool, OptionValue::Bool(_))
                | (OptionType::NullToNan, OptionValue::NullToNan(_))
                | (OptionType::Usize | OptionType::Count, OptionValue::Usize(_))
                | (OptionType::OptionalUsize, OptionValue::OptionalUsize(_))
                | (OptionType::U64 | OptionType::Seed, OptionValue::U64(_))
                | (OptionType::Columns, OptionValue::Columns(_))
                | (OptionType::Names, OptionValue::Names(_))
                | (OptionType::Groups, OptionValue::Groups(_))
                | (OptionType::Sequences, OptionValue::Sequences(_))
                | (OptionType::State, OptionValue::State(_))
                | (OptionType::Images, OptionValue::Images(_))
                | (OptionType::OptionalText, OptionValue::OptionalText(_))
        )
    }
}

/// The first line of a doc comment, without the space that starts it.
pub(super) const fn summary(line: &'static str) -> &'static str {
    line.trim_ascii()
}

/// The error of [`BatchSpec::set_option`] for a name that is no option.
pub(super) fn unknown_option(name: &str) -> Error {
    let known: Vec<&str> = BatchSpec::OPTIONS
        .iter()
        .map(|option| option.name)
        .collect();
    Error::InvalidSpec {
        reason: format!("{name:?} is not an option of BatchSpec; expected one of {known:?}"),
    }
}

/// The error of [`BatchSpec::set_option`] for a value (of variant `found`) of another type than
/// the option's.
pub(super) fn wrong_type(name: &str, found: &'static str) -> Error {
    let expected = OptionDecl::find(name).map_or_else(
        || "no value".to_string(),
        |option| format!("OptionType::{:?}", option.option_type),
    );
    Error::InvalidSpec {
        reason: format!("option {name} takes a value of {expected}; found {found}"),
    }
}

/// The variant of `value`, for messages.
pub(super) fn value_kind(value: &OptionValue) -> &'static str {
    match value {
        OptionValue::Bool(_) => "OptionValue::Bool",
        OptionValue::NullToNan(_) => "OptionValue::NullToNan",
        OptionValue::Usize(_) => "OptionValue::Usize",
        OptionValue::OptionalUsize(_) => "OptionValue::OptionalUsize",
        OptionValue::U64(_) => "OptionValue::U64",
        OptionValue::Columns(_) => "OptionValue::Columns",
        OptionValue::Names(_) => "OptionValue::Names",
        OptionValue::Groups(_) => "OptionValue::Groups",
        OptionValue::Sequences(_) => "OptionValue::Sequences",
        OptionValue::State(_) => "OptionValue::State",
        OptionValue::Images(_) => "OptionValue::Images",
        OptionValue::OptionalText(_) => "OptionValue::OptionalText",
    }
}

/// Declares [`BatchSpec`]: the struct, each field with its documentation and a last line stating
/// its default, `Default`, [`BatchSpec::OPTIONS`], [`BatchSpec::option`] and
/// [`BatchSpec::set_option`].
///
/// Each field is written as a field of the struct, preceded by its doc comment and one
/// attribute, `#[option(Type, Scope, default = expr)]`: its [`OptionType`], its [`OptionScope`]
/// and its default.
macro_rules! batch_spec {
    (
        $(#[$struct_meta:meta])*
        pub struct BatchSpec {
            $(
                #[doc = $summary:literal]
                $(#[doc = $doc:literal])*
                #[option($option_type:ident, $scope:ident, default = $default:expr)]
                pub $field:ident: $ty:ty,
            )*
        }
    ) => {
        $(#[$struct_meta])*
        pub struct BatchSpec {
            $(
                #[doc = $summary]
                $(#[doc = $doc])*
                #[doc = ""]
                #[doc = concat!("Default: `", stringify!($default), "`.")]
                pub $field: $ty,
            )*
        }

        impl Default for BatchSpec {
            fn default() -> Self {
                BatchSpec {
                    $($field: $default,)*
                }
            }
        }

        impl BatchSpec {
            /// Every option of the spec (every field), in the order of the struct: its name,
            /// [`OptionType`], [`OptionScope`], summary and default.
            pub const OPTIONS: &'static [$crate::spec::OptionDecl] = &[
                $(
                    $crate::spec::OptionDecl {
                        name: stringify!($field),
                        option_type: $crate::spec::OptionType::$option_type,
                        scope: $crate::spec::OptionScope::$scope,
                        summary: $crate::spec::options::summary($summary),
                        default_source: stringify!($default),
                        default: || {
                            let value: $ty = $default;
                            $crate::spec::options::OptionField::into_value(value)
                        },
                    },
                )*
            ];

            /// The value of the option `name` (a field of the spec), or `None` when there is
            /// no such option.
            pub fn option(&self, name: &str) -> Option<$crate::spec::OptionValue> {
                use $crate::spec::options::OptionField;
                match name {
                    $(stringify!($field) => Some(self.$field.clone().into_value()),)*
                    _ => None,
                }
            }

            /// Sets the option `name` (a field of the spec) to `value`.
            ///
            /// # Errors
            ///
            /// [`Error::InvalidSpec`](crate::Error::InvalidSpec) when `name` is no option, or
            /// when `value` is not of the option's type. What the value means (a batch size of
            /// 0) is checked when the spec is used.
            pub fn set_option(
                &mut self,
                name: &str,
                value: $crate::spec::OptionValue,
            ) -> $crate::Result<()> {
                use $crate::spec::options::{OptionField, unknown_option, value_kind, wrong_type};
                match name {
                    $(stringify!($field) => {
                        let found = value_kind(&value);
                        let field = $crate::spec::OptionType::$option_type
                            .holds(&value)
                            .then(|| OptionField::from_value(value))
                            .flatten()
                            .ok_or_else(|| wrong_type(name, found))?;
                        self.$field = field;
                    })*
                    _ => return Err(unknown_option(name)),
                }
                Ok(())
            }
        }
    };
}

pub(super) use batch_spec;
