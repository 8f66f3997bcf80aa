//! Closed sets stored as text: approval tiers, tool types, roles, proposal states,
//! export formats. The columns stay text (a drifted value must still load, so that
//! `loadout check` can report it); code holds the enum, parsed at the edge.

use std::fmt;

/// A stored or submitted value outside a closed set.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {value:?}; use one of {expected}")]
pub struct UnknownValue {
    pub what: &'static str,
    pub value: String,
    pub expected: Expected,
}

/// The members of a set, for messages: `a, b, c`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expected(pub &'static [&'static str]);

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join(", "))
    }
}

/// Declares a closed set: the enum with serde (snake_case) and OpenAPI forms,
/// `ALL`, `NAMES`, `as_str`, `Display` and a strict `FromStr`.
#[macro_export]
macro_rules! closed_set {
    ($(#[$meta:meta])* $vis:vis enum $name:ident as $what:literal {
        $($(#[$vmeta:meta])* $variant:ident = $text:literal,)+
    }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord,
            serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
        #[serde(rename_all = "snake_case")]
        $vis enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant,)+
        }

        impl $name {
            /// Every member, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            /// Every member's stored text, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($text),+];

            /// The stored text.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::closed::UnknownValue;

            fn from_str(text: &str) -> Result<Self, Self::Err> {
                match text {
                    $($text => Ok($name::$variant),)+
                    other => Err($crate::closed::UnknownValue {
                        what: $what,
                        value: other.to_owned(),
                        expected: $crate::closed::Expected($name::NAMES),
                    }),
                }
            }
        }
    };
}
