//! The columns of the component rows, one home for every format (CSV, JSONL, Parquet, Arrow):
//! their names in the order the files carry them, what each holds, and which of them a run
//! writes (`analyze --columns`).
//!
//! The choice: by default every column is written (`all`, the 29 columns of
//! `export::CSV_HEADER`), so that readers that take the columns by position keep working;
//! `used` leaves out the groups the run does not fill (the sub-pixel centroid without it, the
//! shape descriptors without `--shapes`, the world position without a mapping; `damaged` is
//! always filled); a list of
//! names (`frame,track,centroid_x,centroid_y`) writes those columns in that order. The header
//! (CSV), the keys (JSONL) and the schema (Parquet, Arrow) always name the columns written.

use crate::error::{Error, Result};

/// One column of the component rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Column {
    Frame,
    Label,
    Left,
    Top,
    Width,
    Height,
    Area,
    CentroidX,
    CentroidY,
    SumX,
    SumY,
    File,
    TimeS,
    Track,
    SubpixelX,
    SubpixelY,
    Mu20,
    Mu02,
    Mu11,
    OrientationDeg,
    MajorAxis,
    MinorAxis,
    Eccentricity,
    InertiaRatio,
    Perimeter,
    Circularity,
    XWorld,
    YWorld,
    Damaged,
    Source,
    SourceName,
    TimeSource,
    FrameSet,
    SkewMs,
    WorldTrack,
    MergedXWorld,
    MergedYWorld,
}

/// What a column holds: its type in the typed formats (Parquet, Arrow), and whether it can be
/// empty (CSV) / null (JSONL, Parquet, Arrow).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An unsigned integer, always present.
    UInt,
    /// A float, always present.
    Float,
    /// An unsigned integer, empty when not computed (`track`).
    OptUInt,
    /// A float, empty when not computed.
    OptFloat,
    /// Text (`file`).
    Text,
    /// Text, empty when not known (`source_name`, `time_source`: rows of no source).
    OptText,
    /// A flag, always present (`damaged`).
    Bool,
}

/// The groups of optional columns a run fills or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Group {
    Always,
    Subpixel,
    Shape,
    World,
    /// Filled only in a run of several sources.
    Sources,
    /// Filled only in a run of several sources that all map into the world.
    WorldMerge,
}

impl Column {
    /// Every column, in the order of `export::CSV_HEADER`.
    pub const ALL: [Column; 29] = [
        Column::Frame,
        Column::Label,
        Column::Left,
        Column::Top,
        Column::Width,
        Column::Height,
        Column::Area,
        Column::CentroidX,
        Column::CentroidY,
        Column::SumX,
        Column::SumY,
        Column::File,
        Column::TimeS,
        Column::Track,
        Column::SubpixelX,
        Column::SubpixelY,
        Column::Mu20,
        Column::Mu02,
        Column::Mu11,
        Column::OrientationDeg,
        Column::MajorAxis,
        Column::MinorAxis,
        Column::Eccentricity,
        Column::InertiaRatio,
        Column::Perimeter,
        Column::Circularity,
        Column::XWorld,
        Column::YWorld,
        Column::Damaged,
    ];

    /// The columns of a run of several sources (`analyze A B …`), after `ALL`: which source a
    /// row is of, what its time is measured by, and its frame set.
    pub const SOURCES: [Column; 5] = [
        Column::Source,
        Column::SourceName,
        Column::TimeSource,
        Column::FrameSet,
        Column::SkewMs,
    ];

    /// The columns of a run of several sources that all map into one world, after
    /// `SOURCES`: the object of the merged world view a row is an observation of (its world
    /// track) and the object's merged world position.
    pub const WORLD_MERGE: [Column; 3] = [
        Column::WorldTrack,
        Column::MergedXWorld,
        Column::MergedYWorld,
    ];

    /// Every column a run can write, in order: `ALL`, `SOURCES`, `WORLD_MERGE`.
    fn every() -> impl Iterator<Item = Column> {
        Column::ALL
            .into_iter()
            .chain(Column::SOURCES)
            .chain(Column::WORLD_MERGE)
    }

    /// The column's name in the CSV header, the JSONL keys and the typed schemas.
    pub fn name(self) -> &'static str {
        match self {
            Column::Frame => "frame",
            Column::Label => "label",
            Column::Left => "left",
            Column::Top => "top",
            Column::Width => "width",
            Column::Height => "height",
            Column::Area => "area",
            Column::CentroidX => "centroid_x",
            Column::CentroidY => "centroid_y",
            Column::SumX => "sum_x",
            Column::SumY => "sum_y",
            Column::File => "file",
            Column::TimeS => "time_s",
            Column::Track => "track",
            Column::SubpixelX => "subpixel_x",
            Column::SubpixelY => "subpixel_y",
            Column::Mu20 => "mu20",
            Column::Mu02 => "mu02",
            Column::Mu11 => "mu11",
            Column::OrientationDeg => "orientation_deg",
            Column::MajorAxis => "major_axis",
            Column::MinorAxis => "minor_axis",
            Column::Eccentricity => "eccentricity",
            Column::InertiaRatio => "inertia_ratio",
            Column::Perimeter => "perimeter",
            Column::Circularity => "circularity",
            Column::XWorld => "x_world",
            Column::YWorld => "y_world",
            Column::Damaged => "damaged",
            Column::Source => "source",
            Column::SourceName => "source_name",
            Column::TimeSource => "time_source",
            Column::FrameSet => "frame_set",
            Column::SkewMs => "skew_ms",
            Column::WorldTrack => "world_track",
            Column::MergedXWorld => "merged_x_world",
            Column::MergedYWorld => "merged_y_world",
        }
    }

    /// The column of this name, if any.
    pub fn from_name(name: &str) -> Option<Column> {
        Column::every().find(|c| c.name() == name)
    }

    pub fn kind(self) -> Kind {
        match self {
            Column::Frame
            | Column::Label
            | Column::Left
            | Column::Top
            | Column::Width
            | Column::Height
            | Column::Area
            | Column::SumX
            | Column::SumY => Kind::UInt,
            Column::CentroidX | Column::CentroidY | Column::TimeS => Kind::Float,
            Column::File => Kind::Text,
            Column::SourceName | Column::TimeSource => Kind::OptText,
            Column::Track | Column::Source | Column::FrameSet | Column::WorldTrack => Kind::OptUInt,
            Column::Damaged => Kind::Bool,
            _ => Kind::OptFloat,
        }
    }

    fn group(self) -> Group {
        match self {
            c if Column::SOURCES.contains(&c) => Group::Sources,
            c if Column::WORLD_MERGE.contains(&c) => Group::WorldMerge,
            Column::SubpixelX | Column::SubpixelY => Group::Subpixel,
            Column::XWorld | Column::YWorld => Group::World,
            c if c.kind() == Kind::OptFloat => Group::Shape,
            _ => Group::Always,
        }
    }
}

/// The optional column groups a run fills.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InUse {
    pub subpixel: bool,
    pub shapes: bool,
    pub world: bool,
    /// Several sources: the source columns (`Column::SOURCES`) follow the others.
    pub sources: bool,
    /// Several sources that all map into the world: the merged world view's columns
    /// (`Column::WORLD_MERGE`) follow the source columns.
    pub world_merge: bool,
}

/// Which columns to write (`--columns`): all of them, those in use, or a list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ColumnChoice {
    /// Every column, in the order of `export::CSV_HEADER` (the default), and the source
    /// columns after them in a run of several sources (then the merged world view's, when
    /// every source maps into the world).
    #[default]
    All,
    /// The columns the run fills (`InUse`), in that order.
    Used,
    /// These columns, in this order.
    List(Vec<Column>),
}

impl ColumnChoice {
    /// `all`, `used`, or column names separated by commas.
    pub fn parse(spec: &str) -> Result<ColumnChoice> {
        match spec.trim() {
            "all" => return Ok(ColumnChoice::All),
            "used" => return Ok(ColumnChoice::Used),
            _ => {}
        }
        let mut list = Vec::new();
        for name in spec.split(',').map(str::trim) {
            if name.is_empty() {
                return Err(Error::Invalid(format!(
                    "--columns '{spec}': an empty column name; give all, used, or names \
                     separated by commas"
                )));
            }
            let Some(column) = Column::from_name(name) else {
                let known: Vec<&str> = Column::ALL.iter().map(|c| c.name()).collect();
                let sources: Vec<&str> = Column::SOURCES.iter().map(|c| c.name()).collect();
                let merged: Vec<&str> = Column::WORLD_MERGE.iter().map(|c| c.name()).collect();
                return Err(Error::Invalid(format!(
                    "--columns: unknown column '{name}'; the columns are {} (with several \
                     sources also {}, and with a world mapping of each {}), or all or used",
                    known.join(","),
                    sources.join(","),
                    merged.join(",")
                )));
            };
            if list.contains(&column) {
                return Err(Error::Invalid(format!(
                    "--columns: column '{name}' is named twice"
                )));
            }
            list.push(column);
        }
        Ok(ColumnChoice::List(list))
    }

    /// The columns written for a run that fills `in_use`.
    pub fn resolve(&self, in_use: InUse) -> Columns {
        match self {
            ColumnChoice::All if in_use.sources => Columns(
                Column::every()
                    .filter(|c| c.group() != Group::WorldMerge || in_use.world_merge)
                    .collect(),
            ),
            ColumnChoice::All => Columns::all(),
            ColumnChoice::Used => Columns(
                Column::every()
                    .filter(|c| match c.group() {
                        Group::Always => true,
                        Group::Subpixel => in_use.subpixel,
                        Group::Shape => in_use.shapes,
                        Group::World => in_use.world,
                        Group::Sources => in_use.sources,
                        Group::WorldMerge => in_use.world_merge,
                    })
                    .collect(),
            ),
            ColumnChoice::List(list) => Columns(list.clone()),
        }
    }
}

/// The columns of a run's rows, in the order they are written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Columns(Vec<Column>);

impl Columns {
    /// Every column (`export::CSV_HEADER`).
    pub fn all() -> Columns {
        Columns(Column::ALL.to_vec())
    }

    pub fn as_slice(&self) -> &[Column] {
        &self.0
    }

    /// The CSV header line (without the newline).
    pub fn header(&self) -> String {
        let names: Vec<&str> = self.0.iter().map(|c| c.name()).collect();
        names.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_is_the_csv_header_in_its_order() {
        assert_eq!(Columns::all().header(), crate::output::export::CSV_HEADER);
        for c in Column::every() {
            assert_eq!(Column::from_name(c.name()), Some(c));
        }
    }

    #[test]
    fn used_leaves_out_the_groups_not_filled() {
        let none = ColumnChoice::Used.resolve(InUse::default()).header();
        assert_eq!(
            none,
            "frame,label,left,top,width,height,area,centroid_x,centroid_y,sum_x,sum_y,file,\
             time_s,track,damaged"
        );
        let world = ColumnChoice::Used.resolve(InUse {
            subpixel: true,
            world: true,
            shapes: false,
            sources: false,
            world_merge: false,
        });
        assert_eq!(world.as_slice().len(), 19);
        assert!(world
            .header()
            .ends_with(",track,subpixel_x,subpixel_y,x_world,y_world,damaged"));
        let every = InUse {
            subpixel: true,
            shapes: true,
            world: true,
            sources: false,
            world_merge: false,
        };
        assert_eq!(ColumnChoice::Used.resolve(every), Columns::all());
        assert_eq!(ColumnChoice::All.resolve(InUse::default()), Columns::all());
        let several = InUse {
            sources: true,
            ..InUse::default()
        };
        assert!(ColumnChoice::Used
            .resolve(several)
            .header()
            .ends_with(",track,damaged,source,source_name,time_source,frame_set,skew_ms"));
        let all = ColumnChoice::All.resolve(several);
        assert_eq!(all.as_slice().len(), 34);
        assert!(all.header().starts_with(crate::output::export::CSV_HEADER));
        // Sources that all map into the world: the merged view's columns come last.
        let merged = InUse {
            world: true,
            sources: true,
            world_merge: true,
            ..InUse::default()
        };
        let all = ColumnChoice::All.resolve(merged);
        assert_eq!(all.as_slice().len(), 37);
        assert!(all
            .header()
            .ends_with(",skew_ms,world_track,merged_x_world,merged_y_world"));
        assert!(ColumnChoice::Used.resolve(merged).header().ends_with(
            ",x_world,y_world,damaged,source,source_name,time_source,frame_set,\
                        skew_ms,world_track,merged_x_world,merged_y_world"
        ));
    }

    #[test]
    fn a_list_keeps_its_order_and_bad_names_are_clear_errors() {
        let list = ColumnChoice::parse("source_name,frame_set,skew_ms").unwrap();
        assert_eq!(
            list.resolve(InUse::default()).header(),
            "source_name,frame_set,skew_ms"
        );
        let list = ColumnChoice::parse("track, frame,centroid_x").unwrap();
        assert_eq!(
            list.resolve(InUse::default()).header(),
            "track,frame,centroid_x"
        );
        assert_eq!(ColumnChoice::parse("all").unwrap(), ColumnChoice::All);
        assert_eq!(ColumnChoice::parse(" used ").unwrap(), ColumnChoice::Used);
        for (spec, why) in [
            ("frame,nope", "unknown column 'nope'"),
            ("frame,,track", "an empty column name"),
            ("", "an empty column name"),
            ("track,frame,track", "'track' is named twice"),
        ] {
            let err = ColumnChoice::parse(spec).unwrap_err().to_string();
            assert!(err.contains(why), "{spec}: {err}");
        }
    }
}
